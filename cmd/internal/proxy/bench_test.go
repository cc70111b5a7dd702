package proxy_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/proxy"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
)

// The proxy benchmark runs only when asked, since it takes a minute or two
// and needs wrk and nginx (apt-get install -y wrk nginx):
//
//	FLOODGATE_PROXY_BENCH=1 go test -run TestProxyBenchmark -v -count=1 -timeout 15m ./cmd/internal/proxy/
//
// FLOODGATE_PROXY_BENCH_SECONDS (default 10) is each wrk run's length,
// FLOODGATE_PROXY_BENCH_ROUNDS (default 5) the rounds of the throughput
// comparison, FLOODGATE_PROXY_BENCH_CONNS (default 64) wrk's connections.
// docs/proxy.md explains the figures.
const benchEnv = "FLOODGATE_PROXY_BENCH"

// The goals the benchmark checks.
const (
	minThroughputRatio = 0.8  // floodgate proxy (always allowing) / bare reverse proxy
	maxAdmittedDiff    = 0.01 // |floodgate − nginx| / nginx, admitted per second
)

// The limit of the nginx comparison: well below what either proxy can
// serve on a small machine, so that the load is far above it.
const (
	benchRate  = 1000 // per second
	benchBurst = 100  // nginx's burst
)

// alwaysAllow routes every request through a real decision (a token
// bucket per client address) that no load on one machine can exhaust.
const alwaysAllow = `
domain: bench
descriptors:
  - key: client
    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 1000000, burst: 1000000}
routes:
  - descriptors: [{entries: [{key: client, from: ip}]}]
`

// equivalent is the floodgate policy equal to nginx's
// `limit_req_zone $binary_remote_addr rate=<rate>r/s` with burst=<burst>:
// nginx admits burst+1 requests at one instant (the first leaves its
// excess at 0), so the bucket's capacity is burst+1.
func equivalent(algorithm floodgate.Algorithm, rate, burst int) string {
	return fmt.Sprintf(`
domain: bench
descriptors:
  - key: client
    rate_limit: {algorithm: %s, unit: second, requests_per_unit: %d, burst: %d}
routes:
  - descriptors: [{entries: [{key: client, from: ip}]}]
`, algorithm, rate, burst+1)
}

type benchSettings struct {
	seconds, rounds, conns int
}

func benchConfig(t *testing.T) benchSettings {
	t.Helper()
	if os.Getenv(benchEnv) == "" {
		t.Skipf("set %s=1 to run the proxy benchmark (needs wrk and nginx)", benchEnv)
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not found; apt-get install -y wrk")
	}
	s := benchSettings{seconds: 10, rounds: 5, conns: 64}
	for name, v := range map[string]*int{"SECONDS": &s.seconds, "ROUNDS": &s.rounds, "CONNS": &s.conns} {
		env := benchEnv + "_" + name
		if raw := os.Getenv(env); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive whole number", env, raw)
			}
			*v = n
		}
	}
	return s
}

// serve runs h on a loopback listener until the test ends.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String() + "/"
}

// floodgateProxy serves a proxy to upstream limited by policyYAML, in memory.
func floodgateProxy(t *testing.T, upstream *url.URL, policyYAML string) string {
	t.Helper()
	mem := floodgate.NewMemory()
	t.Cleanup(mem.Close)
	p, err := proxy.New(proxy.Options{Upstream: upstream, Engine: engine.New(servicetest.Policies(t, policyYAML), engine.OneStore{Limiter: mem}), Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, p)
}

func TestProxyBenchmark(t *testing.T) {
	s := benchConfig(t)
	setup := nginxSetup{
		upstreamPort: freePort(t),
		countedPort:  freePort(t),
		zones: []string{
			fmt.Sprintf("limit_req_zone $binary_remote_addr zone=nodelay:10m rate=%dr/s;", benchRate),
			fmt.Sprintf("limit_req_zone $binary_remote_addr zone=delay:10m rate=%dr/s;", benchRate),
		},
	}
	nodelayPort, delayPort := freePort(t), freePort(t)
	setup.limited = map[int]string{
		nodelayPort: fmt.Sprintf("limit_req zone=nodelay burst=%d nodelay;", benchBurst),
		delayPort:   fmt.Sprintf("limit_req zone=delay burst=%d;", benchBurst),
	}
	dir := startNginx(t, setup)
	upstream, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", setup.upstreamPort))
	counted, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", setup.countedPort))
	d := time.Duration(s.seconds) * time.Second
	t.Logf("wrk -t2 -c%d -d%ds --latency; upstream: nginx `return 200` on 127.0.0.1; GOMAXPROCS %d", s.conns, s.seconds, runtime.GOMAXPROCS(0))

	t.Run("throughput", func(t *testing.T) {
		bare := serve(t, proxy.NewReverseProxy(upstream, proxy.Forwarding{}))
		gated := floodgateProxy(t, upstream, alwaysAllow)
		var ratios []float64
		for round := 1; round <= s.rounds; round++ {
			b := runWrk(t, bare, 2, s.conns, d)
			g := runWrk(t, gated, 2, s.conns, d)
			if b.Non2xx != 0 || g.Non2xx != 0 {
				t.Fatalf("round %d: refusals under an always-allow limit: bare %d, floodgate %d", round, b.Non2xx, g.Non2xx)
			}
			ratio := g.RPS / b.RPS
			ratios = append(ratios, ratio)
			t.Logf("round %d: bare httputil.ReverseProxy %7.0f req/s p99 %-9s | floodgate proxy %7.0f req/s p99 %-9s | ratio %.3f",
				round, b.RPS, b.P99, g.RPS, g.P99, ratio)
		}
		med := median(ratios)
		t.Logf("median throughput ratio floodgate/bare: %.3f (goal ≥ %.1f)", med, minThroughputRatio)
		if med < minThroughputRatio {
			t.Errorf("floodgate proxy reached %.3f of the bare proxy's throughput, below the goal of %.1f", med, minThroughputRatio)
		}
	})

	for _, v := range []struct {
		name      string
		nginxPort int
		algorithm floodgate.Algorithm
	}{
		{"nginx limit_req nodelay vs token_bucket", nodelayPort, floodgate.TokenBucket},
		{"nginx limit_req (delay) vs leaky_bucket", delayPort, floodgate.LeakyBucket},
	} {
		t.Run(v.name, func(t *testing.T) {
			gated := floodgateProxy(t, counted, equivalent(v.algorithm, benchRate, benchBurst))
			t.Logf("rate %d/s burst %d (floodgate burst %d), %ds; admitted/s is the counted upstream's mean over seconds 3..%d (the burst lands in the first two)",
				benchRate, benchBurst, benchBurst+1, s.seconds, s.seconds)
			var perSec [2]float64
			var runs [2]wrkResult
			for i, target := range []string{fmt.Sprintf("http://127.0.0.1:%d/", v.nginxPort), gated} {
				start := time.Now()
				runs[i] = runWrk(t, target, 2, s.conns, d)
				time.Sleep(200 * time.Millisecond) // let the last held requests land in the log
				log, err := os.ReadFile(filepath.Join(dir, "admitted.log"))
				if err != nil {
					t.Fatal(err)
				}
				secs := admittedPerSecond(log, start, start.Add(d))
				if len(secs) < 3 {
					t.Fatalf("a run of %s has no steady second", d)
				}
				perSec[i] = mean(secs[2:])
				t.Logf("  %-9s %7d requests %6d admitted (wrk) | upstream per second %v | steady %7.1f/s | %7.0f req/s p99 %s",
					[]string{"nginx", "floodgate"}[i], runs[i].Requests, runs[i].Admitted(), secs, perSec[i], runs[i].RPS, runs[i].P99)
			}
			diff := (perSec[1] - perSec[0]) / perSec[0]
			t.Logf("  admitted/s differ by %+.2f%% (goal within ±%.0f%%); throughput floodgate/nginx %.3f",
				100*diff, 100*maxAdmittedDiff, runs[1].RPS/runs[0].RPS)
			if math.Abs(diff) > maxAdmittedDiff {
				t.Errorf("admitted per second differ by %.2f%%, more than %.0f%%", 100*diff, 100*maxAdmittedDiff)
			}
		})
	}
}

func mean(xs []int) float64 {
	sum := 0
	for _, x := range xs {
		sum += x
	}
	return float64(sum) / float64(len(xs))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
