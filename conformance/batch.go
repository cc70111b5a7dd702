package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

// RunBatches compares AllowAll with the reference's on random batches:
// several keys and limits per call, sometimes a key twice. It is skipped for
// Limiters that are not BatchLimiters.
func RunBatches(t *testing.T, newLimiter Factory) {
	p := newPair(t, newLimiter)
	batcher, ok := p.got.(floodgate.BatchLimiter)
	if !ok {
		t.Skip("the Limiter is not a floodgate.BatchLimiter")
	}
	rapid.Check(t, func(rt *rapid.T) {
		keys := []string{fmt.Sprintf("b%d:a", rand.Uint64()), fmt.Sprintf("b%d:b", rand.Uint64()), fmt.Sprintf("b%d:c", rand.Uint64())}
		limits := make([]floodgate.Limit, len(keys))
		for i := range limits {
			limits[i] = genLimit(rt, rapid.SampledFrom(floodgate.Algorithms()).Draw(rt, "algorithm"))
		}
		for i, n := 0, rapid.IntRange(1, 12).Draw(rt, "calls"); i < n; i++ {
			p.clock.Advance(time.Duration(rapid.Int64Range(0, 300_000).Draw(rt, "wait_us")) * time.Microsecond)
			var reqs []floodgate.Request
			for _, k := range rapid.SliceOfN(rapid.IntRange(0, len(keys)-1), 1, 4).Draw(rt, "keys") {
				reqs = append(reqs, floodgate.Request{Key: p.ns + keys[k], Limit: limits[k],
					Cost: rapid.Int64Range(0, capacity(limits[k])/2+1).Draw(rt, "cost")})
			}
			p.checkBatch(rt, fmt.Sprintf("call %d", i), batcher, reqs)
		}
	})
}

func (p *pair) checkBatch(t fataler, what string, got floodgate.BatchLimiter, reqs []floodgate.Request) {
	t.Helper()
	ctx := context.Background()
	want, wantErr := p.want.AllowAll(ctx, reqs)
	have, gotErr := got.AllowAll(ctx, reqs)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%s: error %v, reference error %v", what, gotErr, wantErr)
	}
	if !slices.Equal(have, want) {
		t.Fatalf("%s: batch %+v at %s:\n got  %+v\n want %+v", what, reqs, p.clock.Now().Sub(start), have, want)
	}
}
