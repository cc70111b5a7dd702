package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/faults"
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
// own) while each fault of faults.All is injected for 1.5 s and healed.
func TestTimeoutBoundUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real faults for several seconds")
	}
	for _, f := range faults.All() {
		t.Run(f.Name, func(t *testing.T) { runBoundFault(t, f) })
	}
}

func runBoundFault(t *testing.T, f faults.Fault) {
	srv := testkit.StartServer(t)
	proxy := faults.StartProxy(t, srv.Addr())
	l, err := redisstore.New(redisstore.Config{Addrs: []string{proxy.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	probe := timing.StartProbe(t)
	probe.Watch(srv.Pid)
	limit := floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1_000_000, Period: time.Second}
	load := faults.Load{Callers: 48, Spacing: 3 * time.Millisecond, Warm: 300 * time.Millisecond, During: 1500 * time.Millisecond, After: time.Second}
	run := faults.RunFault(t, f, srv, proxy, load, func(g int) error {
		_, err := l.AllowN(context.Background(), "bound:"+string(rune('a'+g%26)), limit, 1)
		return err
	})
	probe.Stop()

	var all, failed []time.Duration
	var okAfterHeal int
	for _, c := range run.Calls {
		all = append(all, c.Took)
		switch {
		case c.Result == nil:
			if c.Start.After(run.HealAt) {
				okAfterHeal++
			}
		case errors.Is(c.Result, floodgate.ErrStoreUnavailable):
			failed = append(failed, c.Took)
		default:
			t.Errorf("a decision failed with %v, not as unavailable", c.Result)
		}
	}
	t.Logf("%s: all decisions %s; failed %s", f.Name, timing.Summarize(all), timing.Summarize(failed))
	faults.CheckBound(t, probe, run, faultTimeout, f.Name)
	if f.Down && len(failed) == 0 {
		t.Errorf("no decision failed during the fault")
	}
	if okAfterHeal == 0 {
		t.Errorf("no decision succeeded after the fault healed")
	}
}
