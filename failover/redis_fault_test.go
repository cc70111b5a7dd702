package failover_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/redisstore"
)

// Faults with real parts: a redis-server killed under load and started
// again, and a proxy between client and server that adds latency above the
// timeout, swallows traffic, or resets connections. For every failure
// policy: every decision comes back within the timeout (plus scheduling
// slack), the policy decides while the store is away, the store decides
// again within a second of coming back, and its counts are right.

const (
	storeTimeout = 50 * time.Millisecond
	// slack covers scheduling on a loaded 2-core machine under -race.
	slack = 150 * time.Millisecond
)

type fault struct {
	name   string
	inject func(t *testing.T, srv *testkit.Server, proxy *testkit.Proxy)
	heal   func(t *testing.T, srv *testkit.Server, proxy *testkit.Proxy)
	// lost reports whether the store forgets its counts (a restart).
	lost bool
}

var faults = []fault{
	{"kill", func(t *testing.T, s *testkit.Server, _ *testkit.Proxy) { s.Kill() },
		func(t *testing.T, s *testkit.Server, _ *testkit.Proxy) { s.Restart(t) }, true},
	{"latency", func(t *testing.T, _ *testkit.Server, p *testkit.Proxy) { p.AddLatency(t, 300) },
		func(t *testing.T, _ *testkit.Server, p *testkit.Proxy) { p.Heal() }, false},
	{"black hole", func(t *testing.T, _ *testkit.Server, p *testkit.Proxy) { p.AddTimeout(t) },
		func(t *testing.T, _ *testkit.Server, p *testkit.Proxy) { p.Heal() }, false},
	{"connection reset", func(t *testing.T, _ *testkit.Server, p *testkit.Proxy) { p.AddResetPeer(t) },
		func(t *testing.T, _ *testkit.Server, p *testkit.Proxy) { p.Heal() }, false},
}

func TestRedisFaultsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real faults for several seconds")
	}
	for _, mode := range failover.Modes() {
		for _, f := range faults {
			t.Run(fmt.Sprintf("%s/%s", mode, f.name), func(t *testing.T) { runFault(t, mode, f) })
		}
	}
}

// outcome is what one decision of the load saw.
type outcome struct {
	at       time.Duration // since the load started
	took     time.Duration
	allowed  bool
	degraded bool
}

func runFault(t *testing.T, mode failover.Mode, f fault) {
	srv := testkit.StartServer(t)
	proxy := testkit.StartProxy(t, srv.Addr())
	store, err := redisstore.New(redisstore.Config{Addrs: []string{proxy.Addr()}, Timeout: storeTimeout, DialTimeout: storeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := failover.New(store, failover.Config{Mode: mode, Timeout: storeTimeout, Nodes: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1_000_000, Period: time.Hour}
	key := fmt.Sprintf("fault:%s:%d", mode, time.Now().UnixNano())

	var (
		mu       sync.Mutex
		outcomes []outcome
	)
	start := time.Now()
	phase := func(d time.Duration) { time.Sleep(d) }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				r, err := lim.Decide(context.Background(), key, limit, 1)
				took := time.Since(t0)
				if err != nil {
					t.Errorf("decision failed instead of degrading: %v", err)
					return
				}
				mu.Lock()
				outcomes = append(outcomes, outcome{at: t0.Sub(start), took: took, allowed: r.Allowed, degraded: r.Degraded})
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // bounded load: ~2000 decisions/s
			}
		})
	}
	phase(300 * time.Millisecond)
	faultAt := time.Since(start)
	f.inject(t, srv, proxy)
	phase(700 * time.Millisecond)
	healAt := time.Since(start)
	f.heal(t, srv, proxy)
	phase(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	lim.Close()
	store.Close()

	checkOutcomes(t, mode, outcomes, faultAt, healAt)
	if !f.lost {
		checkCounts(t, srv, key, limit, outcomes)
	}
}

func checkOutcomes(t *testing.T, mode failover.Mode, outcomes []outcome, faultAt, healAt time.Duration) {
	t.Helper()
	var during, degraded int
	var slowest time.Duration
	var lastDegraded time.Duration
	for _, o := range outcomes {
		slowest = max(slowest, o.took)
		if o.degraded {
			degraded++
			lastDegraded = max(lastDegraded, o.at)
			switch mode {
			case failover.FailOpen, failover.FailLocal:
				if !o.allowed {
					t.Errorf("%s denied a request at %v (the limit is far away)", mode, o.at)
				}
			case failover.FailClosed:
				if o.allowed {
					t.Errorf("fail_closed allowed a request at %v while the store was away", o.at)
				}
			}
		}
		if o.at > faultAt+slack && o.at < healAt {
			during++
		}
	}
	if slowest > storeTimeout+slack {
		t.Errorf("a decision took %v; the store timeout is %v", slowest, storeTimeout)
	}
	if degraded == 0 || during == 0 {
		t.Fatalf("no degraded decisions (%d) or none during the fault (%d)", degraded, during)
	}
	if lastDegraded > healAt+time.Second {
		t.Errorf("still degraded %v after the store came back", lastDegraded-healAt)
	}
	took := make([]time.Duration, len(outcomes))
	for i, o := range outcomes {
		took[i] = o.took
	}
	slices.Sort(took)
	t.Logf("%d decisions, %d degraded; latency p50 %v, p99 %v, max %v; recovered %v after healing",
		len(outcomes), degraded, took[len(took)/2], took[len(took)*99/100], slowest, max(0, lastDegraded-healAt))
}

// checkCounts: the store counted every request it admitted; requests whose
// reply was lost (latency, reset) may have been counted too, never more.
func checkCounts(t *testing.T, srv *testkit.Server, key string, limit floodgate.Limit, outcomes []outcome) {
	t.Helper()
	store, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d, err := store.AllowN(context.Background(), key, limit, 0)
	if err != nil {
		t.Fatal(err)
	}
	counted := limit.Rate - d.Remaining
	var admitted, degraded int64
	for _, o := range outcomes {
		if o.degraded {
			degraded++
		} else if o.allowed {
			admitted++
		}
	}
	if counted < admitted || counted > admitted+degraded {
		t.Errorf("Redis counted %d; the store admitted %d and %d decisions were degraded", counted, admitted, degraded)
	}
}
