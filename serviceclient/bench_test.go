package serviceclient_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/serviceclient"
)

// BenchmarkCachedDenial is the price of a denial the cache answers: no
// call to the service, and no allocation.
func BenchmarkCachedDenial(b *testing.B) {
	srv := startServe(b)
	clock := floodgate.NewManualClock(time.Unix(1_700_000_000, 0))
	c, err := serviceclient.New(serviceclient.Options{HTTP: srv.HTTP, Clock: clock, Timeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, limit := context.Background(), floodgate.PerMinute(1)
	for range 2 {
		if _, err := c.AllowN(ctx, "hot", limit, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if d, _ := c.AllowN(ctx, "hot", limit, 1); d.Allowed {
			b.Fatal("allowed: want the cached denial")
		}
	}
}

// BenchmarkAllowHTTP is a round trip to the service on loopback.
func BenchmarkAllowHTTP(b *testing.B) {
	srv := startServe(b)
	c, err := serviceclient.New(serviceclient.Options{HTTP: srv.HTTP, CacheSize: -1, Timeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, limit := context.Background(), floodgate.PerSecond(1_000_000_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.AllowN(ctx, "k", limit, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPolicyFallback is a policy decision during an outage, once the
// breaker is open: no call, the fallback's answer (FailLocal: a local
// limit given by PolicyLimits, divided by Nodes, large enough to admit).
func BenchmarkPolicyFallback(b *testing.B) {
	for _, mode := range failover.Modes() {
		b.Run(string(mode), func(b *testing.B) {
			limits := func(string, serviceclient.Descriptor) ([]floodgate.Limit, bool) {
				return []floodgate.Limit{floodgate.PerSecond(1_000_000_000)}, true
			}
			c, err := serviceclient.New(serviceclient.Options{HTTP: "http://" + closedPort(b), PolicyLimits: limits,
				Clock:    floodgate.NewManualClock(time.Unix(1_700_000_000, 0)),
				Fallback: failover.Config{Mode: mode, Nodes: 2, Logger: slog.New(slog.DiscardHandler)}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx, descs := context.Background(), user("hot")
			for range failover.DefaultFailureThreshold { // open the breaker
				c.Decide(ctx, "shop", descs, 1)
			}
			b.ReportAllocs()
			for b.Loop() {
				if r, err := c.Decide(ctx, "shop", descs, 1); err != nil || !errors.Is(r.Degraded, failover.ErrBreakerOpen) {
					b.Fatalf("%+v, %v: want the fallback's answer, the breaker open", r, err)
				}
			}
		})
	}
}
