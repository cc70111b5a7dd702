package serviceclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
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
