package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// BenchmarkLeasedAllowN measures a decision on one hot key on the system
// clock, with the coordinator in memory and in a real Redis, and reports the
// coordinator calls per decision: the fast path needs none, so they fall as
// 1/(λ·T).
func BenchmarkLeasedAllowN(b *testing.B) {
	lim := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: MaxLeasedRate, Period: time.Second}
	coordinators := []struct {
		name string
		make func(b *testing.B) Coordinator
	}{
		{"memory", func(b *testing.B) Coordinator {
			return leaseNewMemory(leasedSystemClock{})
		}},
		{"redis", func(b *testing.B) Coordinator {
			srv := testkit.StartServer(b)
			c, err := NewRedisCoordinator(RedisCoordinatorConfig{Client: leaseRedisClient(b, srv.Addr()), KeyPrefix: "bench:"})
			if err != nil {
				b.Fatal(err)
			}
			return c
		}},
	}
	for _, c := range coordinators {
		for _, interval := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond} {
			b.Run(c.name+"/T="+interval.String(), func(b *testing.B) {
				probe := leasedNewProbe(c.make(b), floodgate.NewManualClock(leasedEpoch), time.Second)
				l, err := NewLeased(LeasedConfig{Coordinator: probe, Members: StaticMembers{Name: "a", Nodes: 1}, Interval: interval})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := l.AllowN(ctx, "hot", lim, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(probe.count())/float64(b.N), "calls/op")
			})
		}
	}
}
