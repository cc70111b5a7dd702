package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/adaptive"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// The overload experiment of issue 17, on real listeners: an upstream
// whose capacity is a fixed number of concurrent requests, with a
// constant service time, whose excess requests queue; a real floodgate
// proxy in front; and a closed-loop load generator of a fixed number of
// workers, several times the capacity, a fifth of them critical, two
// fifths default and two fifths sheddable. Without a concurrency limit
// the upstream's queue holds every worker beyond capacity, so latency
// grows with the load; with --concurrency adaptive the proxy keeps the
// queue short and sheds, lower classes first.
//
// The default run is short (two runs of overloadShort); FLOODGATE_OVERLOAD=1
// runs longer, at 3x and 6x capacity, and logs the figures.
const (
	overloadCapacity = 8                     // the upstream's concurrent requests
	overloadService  = 25 * time.Millisecond // its service time
	overloadShort    = 3 * time.Second
	overloadWarmUp   = time.Second // left out of the figures: the limit converges
)

// overloadUpstream serves capacity requests at once, each for service;
// the others wait for a slot, in the order the runtime wakes them.
func overloadUpstream(capacity int, service time.Duration) http.HandlerFunc {
	slots := make(chan struct{}, capacity)
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		defer func() { <-slots }()
		t := time.NewTimer(service) // the work itself, not a wait for a condition
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
	}
}

// classOf is worker i's class: a fifth critical, two fifths each default
// and sheddable.
func classOf(i int) adaptive.Priority {
	return []adaptive.Priority{adaptive.Critical, adaptive.Default, adaptive.Default, adaptive.Sheddable, adaptive.Sheddable}[i%5]
}

// overloadResult is one run's figures, counted after the warm-up.
type overloadResult struct {
	elapsed   time.Duration
	latencies []time.Duration // of the requests served (200)
	from, to  time.Time       // the counted interval
	sent      [3]int          // by class
	served    [3]int
	shed      [3]int // 503
}

func (r overloadResult) goodput() float64 { return float64(len(r.latencies)) / r.elapsed.Seconds() }

func (r overloadResult) p(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func (r overloadResult) ratio(n [3]int, p adaptive.Priority) float64 {
	if r.sent[p] == 0 {
		return 0
	}
	return float64(n[p]) / float64(r.sent[p])
}

func (r overloadResult) String() string {
	return fmt.Sprintf("goodput %.0f/s (capacity %.0f/s), p50 %v, p99 %v, served critical %.3f default %.3f sheddable %.3f, shed critical %.3f default %.3f sheddable %.3f",
		r.goodput(), float64(overloadCapacity)/overloadService.Seconds(), r.p(0.5).Round(time.Millisecond), r.p(0.99).Round(time.Millisecond),
		r.ratio(r.served, adaptive.Critical), r.ratio(r.served, adaptive.Default), r.ratio(r.served, adaptive.Sheddable),
		r.ratio(r.shed, adaptive.Critical), r.ratio(r.shed, adaptive.Default), r.ratio(r.shed, adaptive.Sheddable))
}

// driveOverload runs workers closed-loop against url for d, each sending its
// class in X-Priority; a shed worker pauses one service time before it
// sends again, as a client honouring a short back-off would.
func driveOverload(t *testing.T, url string, workers int, d time.Duration) overloadResult {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	start := time.Now()
	from, end := start.Add(overloadWarmUp), start.Add(d)
	var mu sync.Mutex
	var res overloadResult
	var wg sync.WaitGroup
	for i := range workers {
		p := classOf(i)
		wg.Go(func() {
			for time.Now().Before(end) {
				req, _ := http.NewRequest(http.MethodGet, url+"/work", nil)
				req.Header.Set("X-Priority", p.String())
				began := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("worker %d: %v", i, err)
					return
				}
				resp.Body.Close()
				took := time.Since(began)
				if began.After(from) {
					mu.Lock()
					res.sent[p]++
					switch resp.StatusCode {
					case http.StatusOK:
						res.served[p]++
						res.latencies = append(res.latencies, took)
					case http.StatusServiceUnavailable:
						res.shed[p]++
					}
					mu.Unlock()
				}
				if resp.StatusCode == http.StatusServiceUnavailable {
					time.Sleep(overloadService) // the load generator's back-off, not a wait for a condition
				}
			}
		})
	}
	wg.Wait()
	res.elapsed, res.from, res.to = d-overloadWarmUp, from, end
	return res
}

// overloadRun runs the proxy with args in front of a fresh upstream and
// drives it with load times its capacity in workers.
func overloadRun(t *testing.T, load int, d time.Duration, args ...string) overloadResult {
	up := httptest.NewServer(overloadUpstream(overloadCapacity, overloadService))
	t.Cleanup(up.Close)
	m, _ := startCommand(t, proxyListening, append([]string{"proxy", "--http", "127.0.0.1:0", "--upstream", up.URL, "--limit", "1000000/s"}, args...))
	return driveOverload(t, "http://"+m[1], load*overloadCapacity, d)
}

// TestProxyOverload: at 3x the upstream's capacity, --concurrency
// adaptive keeps the p99 of served requests within 4 service times (the
// issue's goal is 3x the unloaded p99, itself a service time and the
// proxy's overhead; the allowance is for -race), serves ≥ 95% of critical
// requests, and sheds sheddable ones first; without it every request is
// served, late: its p99 is at least 2 service times and grows with the
// load.
//
// The p99 bound allows, beyond timing.Slack, the longest the process stood
// still during the run, as a timing.Probe measured it: a busy machine that
// does not run this process (load generator, proxy and upstream alike) for
// 50 ms delays every request then in flight, a tenth of those counted,
// by as much, which says nothing about the limiter.
func TestProxyOverload(t *testing.T) {
	probe := timing.StartProbe(t)
	long := os.Getenv("FLOODGATE_OVERLOAD") == "1"
	d, loads := overloadShort, []int{3}
	if long {
		d, loads = 20*time.Second, []int{3, 6}
	}
	var unlimited []time.Duration
	for _, load := range loads {
		bare := overloadRun(t, load, d)
		t.Logf("%dx capacity, no limit:           %v", load, bare)
		adapt := overloadRun(t, load, d, "--concurrency", "adaptive")
		stall := probe.Measure(adapt.from, adapt.to).Stall
		t.Logf("%dx capacity, --concurrency adaptive: %v; the process stood still for at most %v", load, adapt, stall.Round(time.Millisecond))
		if got := bare.p(0.99); got < 2*overloadService {
			t.Errorf("%dx, no limit: p99 %v, want ≥ %v (the upstream's queue)", load, got, 2*overloadService)
		}
		unlimited = append(unlimited, bare.p(0.99))
		if got := adapt.p(0.99); got > 4*overloadService+stall+timing.Slack {
			t.Errorf("%dx, adaptive: p99 of served requests %v, want ≤ %v + the longest stall %v + %v; %v",
				load, got, 4*overloadService, stall, timing.Slack, probe)
		}
		if got := adapt.ratio(adapt.served, adaptive.Critical); got < 0.95 {
			t.Errorf("%dx, adaptive: %.3f of critical requests served, want ≥ 0.95", load, got)
		}
		crit, def, shed := adapt.ratio(adapt.shed, adaptive.Critical), adapt.ratio(adapt.shed, adaptive.Default), adapt.ratio(adapt.shed, adaptive.Sheddable)
		if !(shed >= def && def >= crit) || shed == 0 {
			t.Errorf("%dx, adaptive: shed ratios sheddable %.3f, default %.3f, critical %.3f; want sheddable shed most, critical least", load, shed, def, crit)
		}
	}
	if len(unlimited) > 1 && unlimited[1] <= unlimited[0] {
		t.Errorf("no limit: p99 %v at 3x and %v at 6x; want it to grow with the load", unlimited[0], unlimited[1])
	}
}
