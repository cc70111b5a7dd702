package redisstore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/redisstore"
)

// Concurrent callers are decided in shared script calls, and still exactly:
// on a frozen clock, each key admits its capacity and not one request more,
// whatever the batches were, for every algorithm and with several limits
// in flight at once.
func TestConcurrentCallersAreExact(t *testing.T) {
	srv := testkit.StartServer(t)
	clock := floodgate.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, maxBatch := range []int{1, 8, redisstore.DefaultMaxBatch} {
		l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}, KeyPrefix: fmt.Sprintf("c%d:", maxBatch), Clock: clock, Timeout: 5 * time.Second, MaxBatch: maxBatch})
		for _, a := range []floodgate.Algorithm{floodgate.TokenBucket, floodgate.LeakyBucket, floodgate.FixedWindow, floodgate.SlidingLog, floodgate.SlidingWindow} {
			t.Run(fmt.Sprintf("MaxBatch=%d/%s", maxBatch, a), func(t *testing.T) {
				limits := []floodgate.Limit{
					{Algorithm: a, Rate: 50, Period: time.Minute, Burst: 50},
					{Algorithm: a, Rate: 70, Period: time.Hour, Burst: 70},
				}
				var allowed [2][3]atomic.Int64
				var wg sync.WaitGroup
				for g := range 32 {
					wg.Go(func() {
						for i := range 30 {
							li, key := (g+i)%2, i%3
							d, err := l.AllowN(ctx, fmt.Sprintf("%s:%d:%d", a, li, key), limits[li], 1)
							if err != nil {
								t.Error(err)
								return
							}
							if d.Allowed {
								allowed[li][key].Add(1)
							}
						}
					})
				}
				wg.Wait()
				for li := range allowed {
					for key := range allowed[li] {
						if got, want := allowed[li][key].Load(), limits[li].Rate; got != want {
							t.Errorf("limit %d key %d: %d admitted, want exactly %d", li, key, got, want)
						}
					}
				}
			})
		}
	}
}
