package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cluster/clustertest"
)

// The fast path of both strategies: a decision in memory on the last
// global total (synced), and the same plus a shared call for 1 in 100
// admitted requests (sampled, on a clustertest.Counter: no network).
func BenchmarkCounterStrategies(b *testing.B) {
	limit := floodgate.Limit{Algorithm: floodgate.SlidingWindow, Rate: 1 << 40, Period: time.Hour}
	counter, _ := clustertest.NewCounter(floodgate.NewManualClock(counterEpoch))
	synced, _ := cluster.NewSynced(cluster.SyncedConfig{Counter: counter, Interval: time.Second})
	sampled, _ := cluster.NewSampled(cluster.SampledConfig{Counter: counter, OneIn: 100})
	for _, bc := range []struct {
		name string
		l    floodgate.Limiter
	}{{"synced", synced}, {"sampled-1in100", sampled}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := bc.l.AllowN(ctx, "k", limit, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
