package redisstore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
	"github.com/floodgate-io/floodgate/redisstore"
)

// faultTimeout is the store timeout of the fault tests: the default.
const faultTimeout = 50 * time.Millisecond

// The timeout is a bound: whatever Redis or the link to it does, a
// decision returns within Config.Timeout, plus how late the machine ran
// this process (measured by a timing.Probe), plus timing.Slack. 48
// callers decide through a store with its defaults (no deadline of their
// own) while each fault of testkit.Faults is injected for 1.5 s and healed.
func TestTimeoutBoundUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real faults for several seconds")
	}
	for _, f := range testkit.Faults() {
		t.Run(f.Name, func(t *testing.T) { runBoundFault(t, f) })
	}
}

type timedCall struct {
	start time.Time
	took  time.Duration
	err   error
}

func runBoundFault(t *testing.T, f testkit.Fault) {
	srv := testkit.StartServer(t)
	proxy := testkit.StartProxy(t, srv.Addr())
	l := newLimiter(t, redisstore.Config{Addrs: []string{proxy.Addr()}})
	probe := timing.StartProbe(t)
	probe.Watch(srv.Pid)
	limit := floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1_000_000, Period: time.Second}

	const callers = 48
	calls := make([][]timedCall, callers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			key := "bound:" + string(rune('a'+g%26))
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				_, err := l.AllowN(ctx, key, limit, 1)
				calls[g] = append(calls[g], timedCall{start: t0, took: time.Since(t0), err: err})
				time.Sleep(3 * time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	faultAt := time.Now()
	f.Inject(t, srv, proxy)
	time.Sleep(1500 * time.Millisecond)
	f.Heal(t, srv, proxy)
	healAt := time.Now()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	probe.Stop()

	var all, failed []time.Duration
	var worst timedCall
	var worstOver time.Duration
	var okAfterHeal int
	for _, cs := range calls {
		for _, c := range cs {
			all = append(all, c.took)
			over := probe.Over(c.start, c.took, faultTimeout)
			if over > worstOver || worst.start.IsZero() {
				worst, worstOver = c, over
			}
			switch {
			case c.err == nil:
				if c.start.After(healAt) {
					okAfterHeal++
				}
			case errors.Is(c.err, floodgate.ErrStoreUnavailable):
				failed = append(failed, c.took)
			default:
				t.Errorf("a decision failed with %v, not as unavailable", c.err)
			}
		}
	}
	t.Logf("%s: all decisions %s; failed %s", f.Name, timing.Summarize(all), timing.Summarize(failed))
	t.Logf("%s: %s; worst decision %v over the timeout and the lateness", f.Name, probe, worstOver)
	if worstOver > timing.Slack {
		t.Errorf("a decision at %v after the fault took %v: %v over the timeout (%v) and the scheduler's lateness then (%v); allowed %v",
			worst.start.Sub(faultAt).Round(time.Millisecond), worst.took, worstOver, faultTimeout,
			probe.Measure(worst.start, worst.start.Add(worst.took)), timing.Slack)
	}
	if f.Down && len(failed) == 0 {
		t.Errorf("no decision failed during the fault")
	}
	if okAfterHeal == 0 {
		t.Errorf("no decision succeeded after the fault healed")
	}
}
