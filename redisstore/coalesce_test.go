package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate/internal/algo"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// Each algorithm's many-request script against internal/algo: a batch of
// requests on a few keys, under a few limits, decided in one call, gives
// each request the decision internal/algo gives it when the requests are
// decided one after the other at the batch's instant.
func TestManyScriptsMatchAlgo(t *testing.T) {
	srv := testkit.StartServer(t)
	client := newTestClient(t, srv.Addr())
	ctx := context.Background()
	for k := algo.TokenBucket; k <= algo.SlidingWindow; k++ {
		l := &Limiter{scripts: loadScripts()}
		t.Run(k.String(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				var limits []*compiled
				for range rapid.IntRange(1, 3).Draw(rt, "limits") {
					if p, ok := genParams(rt, k); ok {
						limits = append(limits, compile(p))
					}
				}
				if len(limits) == 0 {
					return
				}
				run := rand.Uint64()
				keys := rapid.IntRange(1, 4).Draw(rt, "keys")
				states := make([]algo.State, keys)
				logs := make([]algo.Log, keys)
				now := int64(1_800_000_000_000_000)
				for b := range rapid.IntRange(1, 4).Draw(rt, "batches") {
					now += rapid.Int64Range(0, 2*limits[0].params.Period).Draw(rt, "wait")
					var batch []*pending
					var expected []int64
					for range rapid.IntRange(1, 40).Draw(rt, "size") {
						key := rapid.IntRange(0, keys-1).Draw(rt, "key")
						c := limits[rapid.IntRange(0, len(limits)-1).Draw(rt, "limit")]
						capacity := max(c.params.Burst, c.params.Rate)
						cost := rapid.OneOf(rapid.Just(int64(1)), rapid.Int64Range(0, capacity+1)).Draw(rt, "cost")
						batch = append(batch, &pending{key: fmt.Sprintf("many:%d:%d", run, key), c: c, cost: cost})
						var r algo.Result
						if k == algo.SlidingLog {
							algo.DecideLog(&c.params, &logs[key], now, cost, true, &r)
						} else {
							algo.Decide(&c.params, &states[key], now, cost, &r)
						}
						w := want(&r, now) // allowed, limit, remaining, retry, reset, delay, now
						expected = append(expected, w[0]+2*w[2], w[3], w[4])
						if k.IsBucket() {
							expected = append(expected, w[5])
						}
					}
					expected = append(expected, now)
					callKeys, args := batchCall(itoa(now), "60000", batch)
					got, err := l.scripts.many[k].Exec(ctx, client, callKeys, args).AsIntSlice()
					if err != nil {
						rt.Fatalf("batch %d: %v", b, err)
					}
					if !slices.Equal(got, expected) {
						rt.Fatalf("batch %d of %d requests:\n got  %v\n want %v", b, len(batch), got, expected)
					}
				}
			})
		})
	}
}
