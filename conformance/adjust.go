package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

// RunAdjust checks floodgate.Adjuster against the reference: random
// sequences of decisions and adjustments, charges and refunds of every size,
// for every algorithm, compared Decision by Decision (after an adjustment,
// by a read of cost 0); then two properties of refunds; then bad input. It
// is skipped for Limiters that are not Adjusters.
//
//	func TestAdjustConformance(t *testing.T) {
//		conformance.RunAdjust(t, func(t *testing.T, clock floodgate.Clock) floodgate.Limiter {
//			return newStoreUnderTest(t, clock)
//		})
//	}
func RunAdjust(t *testing.T, newLimiter Factory) {
	t.Run("random", func(t *testing.T) { RunAdjustRandom(t, newLimiter) })
	t.Run("refund never passes empty", func(t *testing.T) { runRefundBound(t, newLimiter) })
	t.Run("charge then refund restores", func(t *testing.T) { runChargeRefund(t, newLimiter) })
	t.Run("bad input", func(t *testing.T) { runAdjustBadInput(t, newLimiter) })
}

// adjusterPair is a pair whose Limiter under test is an Adjuster.
type adjusterPair struct {
	*pair
	got floodgate.Adjuster
}

func newAdjusterPair(t *testing.T, newLimiter Factory) *adjusterPair {
	p := newPair(t, newLimiter)
	a, ok := p.got.(floodgate.Adjuster)
	if !ok {
		t.Skipf("%T is not a floodgate.Adjuster", p.got)
	}
	return &adjusterPair{pair: p, got: a}
}

// adjust adjusts on both, fails unless both fail alike, and then compares a
// read of the key on both.
func (p *adjusterPair) adjust(t fataler, what, key string, limit floodgate.Limit, delta int64) {
	t.Helper()
	ctx := context.Background()
	wantErr := p.want.Adjust(ctx, p.ns+key, limit, delta)
	gotErr := p.got.Adjust(ctx, p.ns+key, limit, delta)
	if !sameFailure(gotErr, wantErr) {
		t.Fatalf("%s: adjusting %v by %d on %q: error %v, reference error %v", what, limit, delta, key, gotErr, wantErr)
	}
	p.check(t, what+", read after adjusting by "+fmt.Sprint(delta), key, limit, 0)
}

// sameFailure reports whether two errors are both nil or both the same kind
// of bad input.
func sameFailure(got, want error) bool {
	if (got == nil) != (want == nil) {
		return false
	}
	for _, kind := range []error{floodgate.ErrInvalidKey, floodgate.ErrKeyTooLong, floodgate.ErrInvalidCost, floodgate.ErrInvalidLimit} {
		if errors.Is(got, kind) != errors.Is(want, kind) {
			return false
		}
	}
	return true
}

// run plays one random sequence of decisions and adjustments on each key,
// the keys taking each step at the same instant.
func (p *adjusterPair) run(t *rapid.T, l floodgate.Limit, keys ...string) {
	for i, n := 0, rapid.IntRange(0, 15).Draw(t, "steps"); i < n; i++ {
		p.clock.Advance(time.Duration(rapid.Int64Range(0, 2*int64(l.Period/time.Microsecond)).Draw(t, "wait_us")) * time.Microsecond)
		what := fmt.Sprintf("step %d", i)
		if rapid.Bool().Draw(t, "adjust") {
			delta := genDelta(t, l)
			for _, key := range keys {
				p.adjust(t, what, key, l, delta)
			}
			continue
		}
		c := capacity(l)
		cost := rapid.OneOf(rapid.Just(int64(1)), rapid.Int64Range(0, c+1), rapid.Int64Range(0, c/3+1)).Draw(t, "cost")
		for _, key := range keys {
			p.check(t, what, key, l, cost)
		}
	}
}

// genAdjustLimit is genLimit, with a huge bucket's period a multiple of its
// rate so that the limit is countable: adjustments need valid limits to
// say anything.
func genAdjustLimit(t *rapid.T, a floodgate.Algorithm) floodgate.Limit {
	l := genLimit(t, a)
	if l.Validate() != nil {
		l.Period = time.Duration(l.Rate*rapid.Int64Range(1, 30).Draw(t, "µs per unit")) * time.Microsecond
	}
	return l
}

// genDelta draws charges and refunds around the capacity, huge ones that
// reach the caps, and the largest accepted and the smallest rejected.
func genDelta(t *rapid.T, l floodgate.Limit) int64 {
	c := capacity(l)
	return rapid.OneOf(
		rapid.Int64Range(-2*c, 2*c),
		rapid.Int64Range(-c/3-1, c/3+1),
		rapid.Int64Range(-floodgate.MaxAdjustment, floodgate.MaxAdjustment),
		rapid.SampledFrom([]int64{
			floodgate.MaxAdjustment, -floodgate.MaxAdjustment,
			floodgate.MaxAdjustment + 1, -floodgate.MaxAdjustment - 1,
		}),
	).Draw(t, "delta")
}

func forEveryAlgorithm(t *testing.T, newLimiter Factory, check func(*rapid.T, *adjusterPair, floodgate.Limit, string)) {
	for _, a := range floodgate.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			p := newAdjusterPair(t, newLimiter)
			rapid.Check(t, func(rt *rapid.T) {
				check(rt, p, genAdjustLimit(rt, a), fmt.Sprintf("a%d", rand.Uint64()))
			})
		})
	}
}

// RunAdjustRandom runs only the random sequences of RunAdjust: the part
// that tells stores apart, for setups too slow to run the whole suite.
func RunAdjustRandom(t *testing.T, newLimiter Factory) {
	forEveryAlgorithm(t, newLimiter, func(rt *rapid.T, p *adjusterPair, l floodgate.Limit, key string) {
		p.run(rt, l, key)
	})
}

// A refund gives back at most what it names, and never more than an empty
// key holds.
func runRefundBound(t *testing.T, newLimiter Factory) {
	forEveryAlgorithm(t, newLimiter, func(rt *rapid.T, p *adjusterPair, l floodgate.Limit, key string) {
		p.run(rt, l, key)
		before := p.check(rt, "before the refund", key, l, 0)
		d := rapid.OneOf(rapid.Int64Range(1, 2*capacity(l)), rapid.Int64Range(1, floodgate.MaxAdjustment)).Draw(rt, "refund")
		p.adjust(rt, "refund", key, l, -d)
		after := p.check(rt, "after the refund", key, l, 0)
		if after.Remaining > capacity(l) || after.Remaining < before.Remaining || after.Remaining-before.Remaining > d {
			rt.Fatalf("a refund of %d took Remaining from %d to %d, capacity %d", d, before.Remaining, after.Remaining, capacity(l))
		}
	})
}

// Charging d units the key has room for and refunding them at the same
// instant changes no decision: the key then decides as its twin, which went
// through the same history without them.
func runChargeRefund(t *testing.T, newLimiter Factory) {
	forEveryAlgorithm(t, newLimiter, func(rt *rapid.T, p *adjusterPair, l floodgate.Limit, key string) {
		twin := key + ":twin"
		p.run(rt, l, key, twin)
		room := p.check(rt, "before the charge", key, l, 0).Remaining
		if room == 0 {
			return
		}
		d := rapid.Int64Range(1, room).Draw(rt, "charge")
		p.adjust(rt, "charge", key, l, d)
		p.adjust(rt, "refund", key, l, -d)
		for _, cost := range []int64{0, d, 1, capacity(l)} {
			got := p.check(rt, "after the charge and refund", key, l, cost)
			if want := p.check(rt, "the twin", twin, l, cost); got != want {
				rt.Fatalf("after a charge and refund of %d, cost %d: %+v, the twin %+v", d, cost, got, want)
			}
		}
	})
}

func runAdjustBadInput(t *testing.T, newLimiter Factory) {
	p := newAdjusterPair(t, newLimiter)
	ok := floodgate.PerSecond(10)
	for _, tc := range []struct {
		name  string
		key   string
		limit floodgate.Limit
		delta int64
	}{
		{"empty key", "", ok, 1},
		{"key too long", strings.Repeat("k", floodgate.MaxKeyBytes), ok, 1},
		{"charge beyond the maximum", "k", ok, floodgate.MaxAdjustment + 1},
		{"refund beyond the maximum", "k", ok, -floodgate.MaxAdjustment - 1},
		{"invalid limit", "k", floodgate.PerSecond(0), 1},
		{"unknown algorithm", "k", ok.WithAlgorithm("gcra"), -1},
		{"invalid limit, delta 0", "k", floodgate.PerSecond(-3), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.key
			if key != "" {
				key = p.ns + key
			}
			err := p.got.Adjust(context.Background(), key, tc.limit, tc.delta)
			if err == nil {
				t.Fatal("bad input accepted")
			}
			if want := p.want.Adjust(context.Background(), key, tc.limit, tc.delta); !sameFailure(err, want) {
				t.Fatalf("error %v, reference error %v", err, want)
			}
		})
	}
}
