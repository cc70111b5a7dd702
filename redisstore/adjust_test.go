package redisstore_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
	"github.com/floodgate-io/floodgate/redisstore"
)

var _ floodgate.Adjuster = (*redisstore.Limiter)(nil)

// After an adjustment the key lives exactly as long as its state needs, as
// after a decision; adjusted back to empty, it is gone.
func TestAdjustSetsTheKeysLifetime(t *testing.T) {
	srv := testkit.StartServer(t)
	clock := floodgate.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}, KeyPrefix: "fg:", Clock: clock, ClockSlack: time.Millisecond})
	for _, a := range floodgate.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			key := "ttl:" + string(a)
			limit := floodgate.Limit{Algorithm: a, Rate: 10, Period: time.Hour}
			if err := l.Adjust(ctx, key, limit, 4); err != nil {
				t.Fatal(err)
			}
			d, err := l.AllowN(ctx, key, limit, 0)
			if err != nil || d.Remaining != 6 {
				t.Fatalf("after a charge of 4: %+v, %v", d, err)
			}
			// ResetAfter plus the 1ms slack, within the time the call took.
			ttl, _ := strconv.ParseInt(srv.Do(t, "PTTL", "fg:"+key), 10, 64)
			if want := d.ResetAfter.Milliseconds() + 1; ttl > want+1 || ttl < want-1000 {
				t.Fatalf("PTTL %dms after a charge, ResetAfter %v", ttl, d.ResetAfter)
			}
			if err := l.Adjust(ctx, key, limit, -10); err != nil {
				t.Fatal(err)
			}
			if got := srv.Do(t, "EXISTS", "fg:"+key); got != "0" {
				t.Fatalf("a key refunded to empty still exists (EXISTS %s)", got)
			}
			if err := l.Adjust(ctx, key, limit, -1); err != nil || srv.Do(t, "EXISTS", "fg:"+key) != "0" {
				t.Fatalf("a refund to a missing key: %v, EXISTS %s", err, srv.Do(t, "EXISTS", "fg:"+key))
			}
		})
	}
}

// A store that does not answer is unavailable for adjustments as for
// decisions, within the timeout.
func TestAdjustOnAnUnreachableStore(t *testing.T) {
	srv := testkit.StartServer(t)
	const timeout = 100 * time.Millisecond
	l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}, Timeout: timeout})
	srv.Kill()
	probe := timing.StartProbe(t)
	start := time.Now()
	if err := l.Adjust(ctx, "k", floodgate.PerSecond(1), 1); !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("error %v, want one wrapping ErrStoreUnavailable", err)
	}
	if waited := time.Since(start); probe.Over(start, waited, timeout) > timing.Slack {
		t.Fatalf("waited %v with a %v timeout (the scheduler was late %v)", waited, timeout, probe.Measure(start, start.Add(waited)))
	}
}

// BenchmarkAdjust measures one adjustment script call over loopback.
func BenchmarkAdjust(b *testing.B) {
	srv := testkit.StartServer(b)
	l, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	limit := floodgate.PerSecond(1_000_000)
	b.ReportAllocs()
	delta := int64(1)
	for b.Loop() {
		if err := l.Adjust(ctx, "bench", limit, delta); err != nil {
			b.Fatal(err)
		}
		delta = -delta
	}
}
