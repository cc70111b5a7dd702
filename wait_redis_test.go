package floodgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
	"github.com/floodgate-io/floodgate/redisstore"
)

// Wait on a real Redis, on real time: the second unit of a 20/s bucket of
// burst 1 passes 50ms after the first, by Redis's clock, and Wait returns
// no earlier than that, nor later than the wait plus the lateness the
// probe measures plus 250ms (a stated allowance for the round trips on a
// busy machine). A deadline nearer than the wait fails at once.
func TestWaitOnRedis(t *testing.T) {
	srv := testkit.StartServer(t)
	store, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	probe := timing.StartProbe(t)
	limit := floodgate.PerSecond(20).WithBurst(1)
	const interval = 50 * time.Millisecond
	ctx := t.Context()

	start := time.Now()
	if d, err := store.AllowN(ctx, "w", limit, 1); err != nil || !d.Allowed {
		t.Fatalf("the first unit: %+v, %v", d, err)
	}
	short, cancel := context.WithTimeout(ctx, interval/5)
	_, err = floodgate.Wait(short, store, "w", limit, 1)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a deadline of %s for a wait of up to %s: %v, want DeadlineExceeded", interval/5, interval, err)
	}
	d, err := floodgate.Wait(ctx, store, "w", limit, 1)
	took := time.Since(start)
	if err != nil || !d.Allowed {
		t.Fatalf("Wait: %+v, %v", d, err)
	}
	// Redis's TIME and this process's clock are the same machine's; 1ms
	// covers TIME's rounding and the clocks' different readings.
	if took < interval-time.Millisecond {
		t.Fatalf("Wait returned %s after the first unit, before the %s the limit asks", took, interval)
	}
	if over := probe.Over(start, took, interval+250*time.Millisecond); over > 0 {
		t.Fatalf("Wait took %s, %s more than %s plus the machine's lateness (%s)", took, over, interval+250*time.Millisecond, probe.Measure(start, start.Add(took)))
	}
}
