package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/client"
	"github.com/floodgate-io/floodgate/cmd/internal/experiments"
)

// The evaluation of issue 18: clients that each offer 5 times their limit
// to a real floodgate proxy, answering its 429s in five ways. Every client
// has its own limit (--limit 1/s --by header:X-Client), so N clients share
// a limit of N/s and offer 5N/s: alone, a client would send a request 0.2 s
// after its last success. Each has a fixed amount of work, a number of
// successful requests, and answers a refusal with its strategy:
//
//   - naive: retry at once, until it passes;
//   - fixed: retry after 1 s;
//   - exponential: retry n after 100 ms·2ⁿ (at most 10 s), without jitter;
//   - full jitter: a uniform draw in [0, 100 ms·2ⁿ), client.DefaultBackoff;
//   - floodgate: client.NewTransport with its defaults; when it gives up
//     (its retries, its budget or its throttle), the client tries again
//     after its 0.2 s, as it would after a success.
//
// Every request a client sends carries X-Attempt, its attempt number for
// the successful request it is working on (0 for the first attempt); the
// requests are counted as they leave for the proxy (every one reaches it:
// the proxy answers each), and the upstream counts the ones admitted.
//
// The default run is short (20 clients, 3 successes each, naive and
// floodgate only); FLOODGATE_CLIENT_EVAL=1 runs 100 clients, 10 successes
// each, every strategy, prints the table and, built with -tags plots,
// draws docs/img/clients-retries.png; FLOODGATE_CLIENT_EVAL=shared does
// the same with one limit of 100/s for all the clients
// (docs/img/clients-retries-shared.png).
const (
	retryThink   = 200 * time.Millisecond // a client's pace: 5 requests a second, 5x its limit
	retryFixed   = time.Second            // the fixed backoff
	retryBin     = 100 * time.Millisecond // the resolution of the counts over time
	retryPlotBin = time.Second            // the plot's bins
	retryTimeout = 2 * time.Minute        // a run's bound: an unfinished run is a failure
)

// retryStrategy is a way to answer a refusal.
type retryStrategy struct {
	name string
	// wait is the time before retry n (0 for the first) of a refused request.
	wait func(n int, rnd *rand.Rand) time.Duration
	// transport: the client sends through client.NewTransport with its defaults.
	transport bool
}

var retryStrategies = []retryStrategy{
	{name: "naive", wait: func(int, *rand.Rand) time.Duration { return 0 }},
	{name: "fixed 1 s", wait: func(int, *rand.Rand) time.Duration { return retryFixed }},
	{name: "exponential", wait: func(n int, _ *rand.Rand) time.Duration { return client.DefaultBackoff.Window(n) }},
	{name: "full jitter", wait: func(n int, rnd *rand.Rand) time.Duration { return client.DefaultBackoff.Delay(n, rnd.Float64()) }},
	{name: "floodgate", wait: func(int, *rand.Rand) time.Duration { return retryThink }, transport: true},
}

// retryTally counts the requests of one run in bins of retryBin since start.
type retryTally struct {
	start   time.Time
	mu      sync.Mutex
	sent    []int // by bin
	retries []int // by bin: attempts after the first
	refused int   // 429s
}

func (t *retryTally) record(at time.Time, retry bool) {
	i := int(at.Sub(t.start) / retryBin)
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.sent) <= i {
		t.sent, t.retries = append(t.sent, 0), append(t.retries, 0)
	}
	t.sent[i]++
	if retry {
		t.retries[i]++
	}
}

func (t *retryTally) refuse() {
	t.mu.Lock()
	t.refused++
	t.mu.Unlock()
}

// retryWire is the last hop of one client before the network: it marks and
// counts every attempt. One client's requests go through it one at a time.
type retryWire struct {
	base    http.RoundTripper
	tally   *retryTally
	attempt int // of the successful request the client is working on
}

func (w *retryWire) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context()) // a RoundTripper must not change its request
	r.Header.Set("X-Attempt", strconv.Itoa(w.attempt))
	w.tally.record(time.Now(), w.attempt > 0)
	w.attempt++
	resp, err := w.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		w.tally.refuse()
	}
	return resp, err
}

// retryResult is one strategy's run.
type retryResult struct {
	strategy         string
	clients          int // each with a limit of 1/s
	successes, sent  int
	retries, refused int
	peakRetries      float64 // the most retries in a second (a sliding window of retryBin steps)
	elapsed          time.Duration
	sentBins         []int
}

func (r retryResult) perSuccess() float64 { return float64(r.sent) / float64(max(1, r.successes)) }

// limit is the clients' limits together, per second.
func (r retryResult) limit() float64 { return float64(r.clients) }

func (r retryResult) row() string {
	return fmt.Sprintf("| %s | %d | %.2f | %d | %.0f/s (%.2fx) | %d | %.1f s |", r.strategy, r.sent, r.perSuccess(),
		r.retries, r.peakRetries, r.peakRetries/r.limit(), r.refused, r.elapsed.Seconds())
}

const retryHeader = "| strategy | requests sent | per success | retries | peak retries/s (x limit) | refused (429) | all finished after |\n|---|---|---|---|---|---|---|"

// peak is the largest sum of a second's worth of consecutive bins.
func peak(bins []int) float64 {
	w := int(time.Second / retryBin)
	best, sum := 0, 0
	for i, n := range bins {
		sum += n
		if i >= w {
			sum -= bins[i-w]
		}
		best = max(best, sum)
	}
	return float64(best)
}

// runRetries runs clients against a fresh proxy and upstream, each working
// until it has work successes, with s's answer to refusals; each client
// limited to 1/s, or, shared, all of them to clients/s together.
func runRetries(t *testing.T, s retryStrategy, clients, work int, shared bool, seed uint64) retryResult {
	var admitted atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := strconv.Atoi(r.Header.Get("X-Attempt")); err != nil {
			http.Error(w, "no X-Attempt", http.StatusBadRequest)
			return
		}
		admitted.Add(1)
	}))
	defer up.Close()
	limit, by := "1/s", "header:X-Client"
	if shared {
		limit, by = strconv.Itoa(clients)+"/s", "method" // every request is a GET: one key
	}
	m, _, stop := startStoppable(t, proxyListening, []string{"proxy", "--http", "127.0.0.1:0", "--upstream", up.URL,
		"--limit", limit, "--by", by, "--insight=false"})
	defer stop()
	base := &http.Transport{MaxIdleConnsPerHost: clients}
	defer base.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), retryTimeout)
	defer cancel()
	tally := &retryTally{start: time.Now()}
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			wire := &retryWire{base: base, tally: tally}
			c := &http.Client{Transport: wire}
			if s.transport {
				c.Transport = client.NewTransport(wire)
			}
			rnd := rand.New(rand.NewPCG(seed, uint64(i)))
			if err := retryClient(ctx, c, wire, "http://"+m[1]+"/work", "c"+strconv.Itoa(i), s, work, rnd); err != nil {
				t.Errorf("%s, client %d: %v", s.name, i, err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(tally.start)
	res := retryResult{strategy: s.name, clients: clients, successes: clients * work, refused: tally.refused,
		peakRetries: peak(tally.retries), elapsed: elapsed, sentBins: tally.sent}
	for i := range tally.sent {
		res.sent += tally.sent[i]
		res.retries += tally.retries[i]
	}
	if got := int(admitted.Load()); got != res.successes {
		t.Errorf("%s: the upstream admitted %d requests, the clients counted %d successes", s.name, got, res.successes)
	}
	return res
}

// retryClient does one client's work: work successful GETs of url, the next
// retryThink after the last, each retried as s says until it passes.
func retryClient(ctx context.Context, c *http.Client, wire *retryWire, url, id string, s retryStrategy, work int, rnd *rand.Rand) error {
	for done := 0; done < work; done++ {
		if done > 0 {
			if err := sleepCtx(ctx, retryThink); err != nil {
				return err
			}
		}
		wire.attempt = 0
		for n := 0; ; n++ {
			ok, err := retryOnce(ctx, c, url, id)
			if err != nil {
				return err
			}
			if ok {
				break
			}
			if err := sleepCtx(ctx, s.wait(n, rnd)); err != nil {
				return err
			}
		}
	}
	return nil
}

// retryOnce sends one request and reports whether it passed; a refusal
// (429, or the transport's throttle) is false with no error.
func retryOnce(ctx context.Context, c *http.Client, url, id string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("X-Client", id)
	resp, err := c.Do(req)
	if errors.Is(err, client.ErrThrottled) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusTooManyRequests:
		return false, nil
	}
	return false, fmt.Errorf("unexpected status %d", resp.StatusCode)
}

// sleepCtx is a client's pause (its pace or its backoff, part of the
// workload), cut short when the run's bound passes.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if err := client.Sleep(ctx, d); err != nil {
		return fmt.Errorf("the run passed its bound of %v: %w", retryTimeout, err)
	}
	return nil
}

// TestClientRetries: clients at 5x their limit. Floodgate's transport
// sends at most 1.2 requests per success (the pre-emptive pause of
// RateLimit: r=0 holds a client's next request until its limit has room),
// with no burst of retries above 1.5x the limit; naive immediate retry
// sends at least 5 times as many requests per success (on an idle
// machine: hundreds; the allowance is for a busy 2-core one under -race,
// which slows the naive clients' loop).
//
// FLOODGATE_CLIENT_EVAL=shared runs the long version against one limit
// shared by all the clients, where an r a client hears is read by all of
// them: the transport learns from consecutive answers how much the others
// take (the margin) and pauses within it, and the same goals hold.
func TestClientRetries(t *testing.T) {
	mode := os.Getenv("FLOODGATE_CLIENT_EVAL")
	long, shared := mode == "1" || mode == "shared", mode == "shared"
	clients, work, strategies := 20, 3, []retryStrategy{retryStrategies[0], retryStrategies[4]}
	if long {
		clients, work, strategies = 100, 10, retryStrategies
	}
	var results []retryResult
	for _, s := range strategies {
		results = append(results, runRetries(t, s, clients, work, shared, 18))
	}
	limits := "each limited to 1/s"
	if shared {
		limits = fmt.Sprintf("sharing one limit of %d/s", clients)
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%d clients, %s, each offering 5/s, %d successes each\n%s\n", clients, limits, work, retryHeader)
	for _, r := range results {
		fmt.Fprintln(&table, r.row())
	}
	t.Log("\n" + table.String())
	naive, fg := results[0], results[len(results)-1]
	if got := fg.perSuccess(); got > 1.2 {
		t.Errorf("floodgate: %.2f requests per success, want ≤ 1.2", got)
	}
	if got, limit := fg.peakRetries, fg.limit(); got > 1.5*limit {
		t.Errorf("floodgate: a peak of %.0f retries/s, want ≤ 1.5x the limit of %.0f/s", got, limit)
	}
	if got, want := naive.perSuccess(), 5*fg.perSuccess(); got < want {
		t.Errorf("naive: %.2f requests per success, want ≥ %.2f (5x floodgate's)", got, want)
	}
	if long {
		name := "clients-retries.png"
		if shared {
			name = "clients-retries-shared.png"
		}
		plotRetries(t, results, limits, name)
	}
}

// plotRetries draws the requests a second at the proxy over time, per
// strategy, into docs/img/name, in a build with -tags plots.
func plotRetries(t *testing.T, results []retryResult, limits, name string) {
	if experiments.Drawable() != nil {
		t.Log("not drawn: run with -tags plots to draw docs/img/" + name)
		return
	}
	per := int(retryPlotBin / retryBin)
	var series []experiments.Series
	var end float64
	for _, r := range results {
		var s experiments.Series
		s.Name = r.strategy
		for i := 0; i < len(r.sentBins); i += per {
			n := 0
			for _, c := range r.sentBins[i:min(i+per, len(r.sentBins))] {
				n += c
			}
			s.X = append(s.X, (time.Duration(i)*retryBin + retryPlotBin/2).Seconds())
			s.Y = append(s.Y, max(1, float64(n)/retryPlotBin.Seconds())) // a log axis: 1/s stands for none
		}
		end = max(end, r.elapsed.Seconds())
		series = append(series, s)
	}
	limit := results[0].limit()
	series = append(series, experiments.Series{Name: fmt.Sprintf("the limit (%.0f/s)", limit), X: []float64{0, end}, Y: []float64{limit, limit}, Dashed: true})
	err := experiments.Chart{
		Title:  fmt.Sprintf("%d clients %s at 5x: requests at the proxy", results[0].clients, limits),
		XLabel: "time (s)", YLabel: "requests/s (log)", LogY: true, Series: series,
	}.WritePNG(filepath.Join("..", "..", "..", "docs", "img", name))
	if err != nil {
		t.Error(err)
	}
}
