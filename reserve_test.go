package floodgate_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

func reserve(t *testing.T, m *floodgate.Memory, limit floodgate.Limit, cost int64) *floodgate.Reservation {
	t.Helper()
	r, err := m.Reserve(t.Context(), "k", limit, cost)
	if err != nil {
		t.Fatalf("Reserve(%v, %d): %v", limit, cost, err)
	}
	return r
}

func remaining(t *testing.T, m *floodgate.Memory, limit floodgate.Limit) int64 {
	t.Helper()
	d, err := m.AllowN(t.Context(), "k", limit, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

// Each algorithm's reservation, step by step: what it takes, its Delay,
// and what Cancel gives back when.
func TestReserveAndCancel(t *testing.T) {
	tb := floodgate.PerSecond(10).WithBurst(3) // a unit every 100ms
	leaky := tb.WithAlgorithm(floodgate.LeakyBucket)
	fixed := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 3, Period: time.Second}
	sliding := fixed.WithAlgorithm(floodgate.SlidingWindow)
	for _, tc := range []struct {
		name  string
		limit floodgate.Limit
		// before Cancel: reserve these costs, then let this much time pass
		costs   []int64
		wait    time.Duration
		cancel  int // which reservation to cancel (index in costs)
		delays  []time.Duration
		ok      []bool
		gotBack int64 // Remaining after Cancel minus before
	}{
		{name: "token bucket: passes now, Delay 0; Cancel at once gives it back", limit: tb,
			costs: []int64{2}, delays: []time.Duration{0}, ok: []bool{true}, gotBack: 2},
		{name: "token bucket: a reservation that would have to wait is not OK", limit: tb,
			costs: []int64{3, 1}, delays: []time.Duration{0, math.MaxInt64}, ok: []bool{true, false}, cancel: 1, gotBack: 0},
		{name: "token bucket: Cancel before the bucket refilled the units is exact", limit: tb,
			costs: []int64{3}, wait: 250 * time.Millisecond, delays: []time.Duration{0}, ok: []bool{true}, gotBack: 3 - 2},
		{name: "token bucket: nothing once the bucket refilled them", limit: tb,
			costs: []int64{1}, wait: 100 * time.Millisecond, delays: []time.Duration{0}, ok: []bool{true}, gotBack: 0},
		{name: "leaky bucket: places in the queue 100ms apart", limit: leaky,
			costs: []int64{1, 1, 1}, delays: []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond},
			ok: []bool{true, true, true}, cancel: 2, gotBack: 1},
		{name: "leaky bucket: the one queued behind keeps its place (x/time/rate's rule)", limit: leaky,
			costs: []int64{1, 1, 1}, delays: []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond},
			ok: []bool{true, true, true}, cancel: 1, gotBack: 0},
		{name: "leaky bucket: given back at the instant its time comes", limit: leaky,
			costs: []int64{1, 1}, wait: 100 * time.Millisecond, delays: []time.Duration{0, 0},
			ok: []bool{true, true}, cancel: 1, gotBack: 1},
		{name: "leaky bucket: nothing once its time has passed", limit: leaky,
			costs: []int64{1, 1}, wait: 150 * time.Millisecond, delays: []time.Duration{0, 0},
			ok: []bool{true, true}, cancel: 1, gotBack: 0},
		{name: "leaky bucket: Delay counts down", limit: leaky,
			costs: []int64{1, 1, 1}, wait: 50 * time.Millisecond, delays: []time.Duration{0, 50 * time.Millisecond, 150 * time.Millisecond},
			ok: []bool{true, true, true}, cancel: 2, gotBack: 1},
		{name: "fixed window: given back within its window", limit: fixed,
			costs: []int64{2}, wait: 900 * time.Millisecond, delays: []time.Duration{0}, ok: []bool{true}, gotBack: 2},
		{name: "fixed window: nothing from a past window", limit: fixed,
			costs: []int64{2}, wait: time.Second, delays: []time.Duration{0}, ok: []bool{true}, gotBack: 0},
		{name: "sliding window: given back within its window", limit: sliding,
			costs: []int64{2}, wait: 500 * time.Millisecond, delays: []time.Duration{0}, ok: []bool{true}, gotBack: 2},
		{name: "sliding window: nothing once its window is the previous one", limit: sliding,
			costs: []int64{3}, wait: 1500 * time.Millisecond, delays: []time.Duration{0}, ok: []bool{true}, gotBack: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, clock := newVirtual() // starts on a whole second
			var rs []*floodgate.Reservation
			for _, c := range tc.costs {
				rs = append(rs, reserve(t, m, tc.limit, c))
			}
			clock.Advance(tc.wait)
			for i, r := range rs {
				if r.OK() != tc.ok[i] || r.Delay() != tc.delays[i] {
					t.Fatalf("reservation %d of cost %d: OK %v, Delay %s; want %v, %s (%+v)",
						i, tc.costs[i], r.OK(), r.Delay(), tc.ok[i], tc.delays[i], r.Decision())
				}
			}
			before := remaining(t, m, tc.limit)
			rs[tc.cancel].Cancel()
			rs[tc.cancel].Cancel() // a second Cancel does nothing
			if got := remaining(t, m, tc.limit) - before; got != tc.gotBack {
				t.Fatalf("Cancel gave back %d units, want %d", got, tc.gotBack)
			}
		})
	}
}

func TestReserveRefusesBadInputAndTheSlidingLog(t *testing.T) {
	m, _ := newVirtual()
	for _, tc := range []struct {
		name  string
		key   string
		limit floodgate.Limit
		cost  int64
		want  error
	}{
		{"sliding log", "k", floodgate.Limit{Algorithm: floodgate.SlidingLog, Rate: 3, Period: time.Second}, 1, floodgate.ErrNotReservable},
		{"empty key", "", floodgate.PerSecond(1), 1, floodgate.ErrInvalidKey},
		{"negative cost", "k", floodgate.PerSecond(1), -1, floodgate.ErrInvalidCost},
		{"bad limit", "k", floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 0, Period: time.Second}, 1, floodgate.ErrInvalidLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := m.Reserve(t.Context(), tc.key, tc.limit, tc.cost)
			if !errors.Is(err, tc.want) || r != nil {
				t.Fatalf("Reserve: %v, %v; want an error wrapping %v", r, err, tc.want)
			}
		})
	}
}

// floodgate.Reserve reserves on any Limiter that can (a *Memory) and fails
// on the others with ErrNotReservable, without asking them.
func TestReserveOnAnyLimiter(t *testing.T) {
	asked := false
	other := limiterFunc(func(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
		asked = true
		return floodgate.Decision{Allowed: true}, nil
	})
	m, _ := newVirtual()
	for _, tc := range []struct {
		name string
		l    floodgate.Limiter
		ok   bool  // an OK reservation, or else an error
		want error // the error wraps this, when not nil
	}{
		{name: "a Memory", l: m, ok: true},
		{name: "a Limiter that does not reserve", l: other, want: floodgate.ErrNotReservable},
		{name: "nil", l: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := floodgate.Reserve(t.Context(), tc.l, "k", floodgate.PerSecond(10), 1)
			if tc.ok {
				if err != nil || !r.OK() {
					t.Fatalf("Reserve: %+v, %v; want an OK reservation", r, err)
				}
				return
			}
			if err == nil || r != nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("Reserve: %v, %v; want no reservation and an error (wrapping %v)", r, err, tc.want)
			}
		})
	}
	if asked {
		t.Fatal("Reserve asked a Limiter that cannot reserve for a decision")
	}
}

// A reservation cancelled after its key was Reset gives nothing back: the
// key is gone, and a fresh one starts full.
func TestCancelAfterResetDoesNothing(t *testing.T) {
	m, _ := newVirtual()
	limit := floodgate.PerSecond(10).WithAlgorithm(floodgate.LeakyBucket)
	r := reserve(t, m, limit, 5)
	if err := m.Reset(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	reserve(t, m, limit, 3)
	before := remaining(t, m, limit)
	r.Cancel()
	if after := remaining(t, m, limit); after != before {
		t.Fatalf("Remaining %d → %d after cancelling a reservation made before Reset", before, after)
	}
}

// A reservation cancelled after the key was decided under another limit
// gives nothing back: its units are no longer what the key counts.
func TestCancelAfterTheLimitChangedDoesNothing(t *testing.T) {
	m, _ := newVirtual()
	r := reserve(t, m, floodgate.PerSecond(10), 5)
	other := floodgate.PerSecond(20)
	before := remaining(t, m, other)
	r.Cancel()
	if after := remaining(t, m, other); after != before {
		t.Fatalf("Remaining %d → %d after cancelling a reservation made under another limit", before, after)
	}
}

// Cancel never gives back more than the reservation took: after it, the
// key admits no more than a key that never saw the reservation but saw
// every request admitted around it; and it is exact (the same Remaining
// and ResetAfter) while nothing has been counted behind it: a token bucket
// with nothing admitted since, before its ResetAfter; a window within its
// window; a leaky bucket with nothing queued after it, before its time.
// And a leaky reservation cancelled a whole µs before its time gives back
// all its units when nothing queued behind it, none when something did
// (x/time/rate's rule, for unit costs; see unqueue for larger ones).
func TestCancelNeverGivesBackMoreThanItTook(t *testing.T) {
	algs := []floodgate.Algorithm{floodgate.TokenBucket, floodgate.LeakyBucket, floodgate.FixedWindow, floodgate.SlidingWindow}
	rapid.Check(t, func(t *rapid.T) {
		limit := genLimit(t, rapid.SampledFrom(algs).Draw(t, "algorithm"))
		clock := floodgate.NewManualClock(epoch)
		real, truth := floodgate.NewMemory(floodgate.WithClock(clock)), floodgate.NewMemory(floodgate.WithClock(clock))
		p := periodMicros(limit)
		gap := func(label string) {
			clock.Advance(time.Duration(rapid.Int64Range(0, p).Draw(t, label)) * time.Microsecond)
		}
		allow := func(m *floodgate.Memory, cost int64) floodgate.Decision {
			d, err := m.AllowN(t.Context(), "k", limit, cost)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		cost := rapid.Int64Range(1, capacity(limit))
		for i, n := 0, rapid.IntRange(0, 5).Draw(t, "before"); i < n; i++ {
			gap("gap before")
			c := cost.Draw(t, "cost before")
			if allow(real, c).Allowed != allow(truth, c).Allowed {
				t.Fatal("two keys with the same history decided apart")
			}
		}
		gap("gap to the reservation")
		reserved := cost.Draw(t, "reserved")
		r, err := real.Reserve(t.Context(), "k", limit, reserved)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			return
		}
		at, admittedAfter, queuedBehind, sumAfter := clock.Now(), false, false, int64(0)
		for i, n := 0, rapid.IntRange(0, 5).Draw(t, "after"); i < n; i++ {
			gap("gap after")
			c := cost.Draw(t, "cost after")
			if d := allow(real, c); d.Allowed {
				admittedAfter, sumAfter = true, sumAfter+c
				queuedBehind = queuedBehind || clock.Now().Before(at.Add(r.Decision().Delay))
				if !allow(truth, c).Allowed {
					t.Fatalf("admitted with the reservation, denied without it: cost %d", c)
				}
			}
		}
		gap("gap to Cancel")
		before := allow(real, 0)
		r.Cancel()
		got, want := allow(real, 0), allow(truth, 0)
		if got.Remaining > want.Remaining || got.ResetAfter < want.ResetAfter {
			t.Fatalf("%v: after Cancel %+v, more room than without the reservation: %+v", limit, got, want)
		}
		elapsed, reset := us(clock.Now().Sub(at)), us(r.Decision().ResetAfter)
		exact := false
		switch limit.Algorithm {
		case floodgate.TokenBucket:
			exact = !admittedAfter && elapsed < reset
		case floodgate.LeakyBucket:
			exact = !queuedBehind && elapsed < us(r.Decision().Delay)
		default:
			exact = at.UnixMicro()/p == clock.Now().UnixMicro()/p
		}
		if exact && (got.Remaining != want.Remaining || got.ResetAfter != want.ResetAfter) {
			t.Fatalf("%v: after Cancel %+v, without the reservation %+v", limit, got, want)
		}
		if got.Remaining < before.Remaining {
			t.Fatalf("%v: Cancel took room: Remaining %d → %d", limit, before.Remaining, got.Remaining)
		}
		if limit.Algorithm == floodgate.LeakyBucket && elapsed+1 <= us(r.Decision().Delay) {
			want := reserved
			if sumAfter > 0 {
				want = 0
			}
			if back := got.Remaining - before.Remaining; back != want {
				t.Fatalf("%v: Cancel %dµs before its time gave back %d units; reserved %d, %d queued behind since",
					limit, us(r.Decision().Delay)-elapsed, back, reserved, sumAfter)
			}
		}
	})
}

// Reserve then Cancel on one key: both take the shard's lock; Reserve
// inlines, so a reservation its caller keeps to itself is not allocated.
func BenchmarkReserveCancel(b *testing.B) {
	m := floodgate.NewMemory()
	limit := floodgate.PerSecond(1_000_000)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		r, err := m.Reserve(ctx, "k", limit, 1)
		if err != nil {
			b.Fatal(err)
		}
		r.Cancel()
	}
}

// A bucket's Cancel gives back only while nothing has been counted on the
// key since the reservation, and then only what is still ahead of now of
// its units: never the part that has already drained, which a later
// request may have been counted from. Each case runs the same requests on
// a key without the reservation (the truth): Cancel leaves the key as
// that one, or with less room when a request came since. The leaky limits
// are 3 per µs: a unit is a third of a µs, and the reservation's Delay is
// rounded up to 1µs, so its time comes after part of its place has
// drained (rapid found the first case, where Cancel gave back room that a
// later request had been counted from).
func TestBucketCancelGivesBackNoMoreThanItTook(t *testing.T) {
	leaky := floodgate.Limit{Algorithm: floodgate.LeakyBucket, Rate: 3, Period: time.Microsecond}
	type step struct {
		gap     time.Duration // before the step
		cost    int64
		reserve bool // the reservation, rather than an AllowN
	}
	for _, tc := range []struct {
		name        string
		limit       floodgate.Limit
		steps       []step
		cancelGap   time.Duration // from the last step to Cancel
		want, truth int64         // Remaining after Cancel; on the key without the reservation
	}{
		{name: "rapid's case: the reservation drained by its time, the request after counted from now",
			limit: leaky, // burst 3
			steps: []step{{0, 1, false}, {0, 1, false}, {0, 1, false}, {time.Microsecond, 1, false},
				{0, 2, true}, // Delay 1µs: its place is 1⅓µs to 2µs
				{0, 1, false}, {time.Microsecond, 1, false}},
			want: 2, truth: 2},
		{name: "cancelled at its time, a request queued behind since: nothing given back",
			limit: leaky.WithBurst(6),
			steps: []step{{0, 1, false},
				{0, 3, true}, // Delay 1µs: its place is ⅓µs to 1⅓µs
				{time.Microsecond, 1, false}},
			want: 4, truth: 5},
		{name: "cancelled at its time, nothing since: the third of a µs still ahead given back",
			limit:     leaky.WithBurst(6),
			steps:     []step{{0, 1, false}, {0, 3, true}}, // Delay 1µs: its place is ⅓µs to 1⅓µs
			cancelGap: time.Microsecond, want: 6, truth: 6},
		{name: "cancelled before its time, nothing since: all of it",
			limit:     leaky.WithBurst(6),
			steps:     []step{{0, 4, false}, {0, 2, true}}, // Delay 2µs
			cancelGap: time.Microsecond, want: 5, truth: 5},
		{name: "token bucket: a request since, nothing given back",
			limit: floodgate.PerSecond(10).WithBurst(3), // a unit every 100ms
			steps: []step{{0, 3, true}, {250 * time.Millisecond, 1, false}},
			want:  1, truth: 2},
		{name: "token bucket: nothing since, the 50ms not yet refilled given back",
			limit:     floodgate.PerSecond(10).WithBurst(3),
			steps:     []step{{0, 3, true}},
			cancelGap: 250 * time.Millisecond, want: 3, truth: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			real, clock := newVirtual()
			truth := floodgate.NewMemory(floodgate.WithClock(clock))
			var r *floodgate.Reservation
			for i, s := range tc.steps {
				clock.Advance(s.gap)
				if s.reserve {
					r = reserve(t, real, tc.limit, s.cost)
					if !r.OK() {
						t.Fatalf("step %d: the reservation of %d is not OK: %+v", i, s.cost, r.Decision())
					}
					continue
				}
				d, err := real.AllowN(t.Context(), "k", tc.limit, s.cost)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					if _, err := truth.AllowN(t.Context(), "k", tc.limit, s.cost); err != nil {
						t.Fatal(err)
					}
				}
			}
			clock.Advance(tc.cancelGap)
			r.Cancel()
			got, truthHas := remaining(t, real, tc.limit), remaining(t, truth, tc.limit)
			if truthHas != tc.truth {
				t.Fatalf("the case is wrong: the truth has %d remaining, the case says %d", truthHas, tc.truth)
			}
			if got > truthHas || got != tc.want {
				t.Fatalf("after Cancel %d remaining, want %d; a key that never saw the reservation has %d", got, tc.want, truthHas)
			}
		})
	}
}

// Many reservations, cancelled in any order among requests and pauses:
// every decision and the key's room at the end are never more generous
// than those of a key that saw the same admitted requests and only the
// reservations never cancelled (replayed afterwards at the same instants).
func TestCancelsInAnyOrderNeverGiveBackMoreThanTaken(t *testing.T) {
	algs := []floodgate.Algorithm{floodgate.TokenBucket, floodgate.LeakyBucket, floodgate.FixedWindow, floodgate.SlidingWindow}
	rapid.Check(t, func(t *rapid.T) {
		limit := genLimit(t, rapid.SampledFrom(algs).Draw(t, "algorithm"))
		clock := floodgate.NewManualClock(epoch)
		real := floodgate.NewMemory(floodgate.WithClock(clock))
		type event struct {
			at        time.Time
			cost      int64
			cancelled bool
		}
		var events []*event // admitted requests and OK reservations, in order
		type held struct {
			r *floodgate.Reservation
			e *event
		}
		var holding []held
		cost := rapid.Int64Range(1, capacity(limit))
		for i, n := 0, rapid.IntRange(1, 12).Draw(t, "steps"); i < n; i++ {
			switch op := rapid.IntRange(0, 3).Draw(t, "op"); {
			case op == 0:
				clock.Advance(time.Duration(rapid.Int64Range(0, periodMicros(limit)).Draw(t, "gap")) * time.Microsecond)
			case op == 1:
				c := cost.Draw(t, "cost")
				d, err := real.AllowN(t.Context(), "k", limit, c)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					events = append(events, &event{at: clock.Now(), cost: c})
				}
			case op == 2:
				c := cost.Draw(t, "reserved")
				r, err := real.Reserve(t.Context(), "k", limit, c)
				if err != nil {
					t.Fatal(err)
				}
				if r.OK() {
					e := &event{at: clock.Now(), cost: c}
					events = append(events, e)
					holding = append(holding, held{r, e})
				}
			case len(holding) > 0:
				i := rapid.IntRange(0, len(holding)-1).Draw(t, "cancel")
				holding[i].r.Cancel()
				holding[i].e.cancelled = true
				holding = append(holding[:i], holding[i+1:]...)
			}
		}
		end := clock.Now()
		got, err := real.AllowN(t.Context(), "k", limit, 0)
		if err != nil {
			t.Fatal(err)
		}
		replay := floodgate.NewManualClock(epoch)
		truth := floodgate.NewMemory(floodgate.WithClock(replay))
		for i, e := range events {
			if e.cancelled {
				continue
			}
			replay.Set(e.at)
			if d, err := truth.AllowN(t.Context(), "k", limit, e.cost); err != nil || !d.Allowed {
				t.Fatalf("%v: event %d (cost %d at +%s) admitted with the cancels, denied without the cancelled reservations: %+v, %v",
					limit, i, e.cost, e.at.Sub(epoch), d, err)
			}
		}
		replay.Set(end)
		want, err := truth.AllowN(t.Context(), "k", limit, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got.Remaining > want.Remaining || got.ResetAfter < want.ResetAfter {
			t.Fatalf("%v: at the end %+v, more room than without the cancelled reservations: %+v", limit, got, want)
		}
	})
}

// Found by the property above: two reservations at one instant, the first
// (of 2 units) cancelled, a request a µs later, then the second cancelled.
// Without the reservations the key holds the request's unit. Under
// x/time/rate's rule the first Cancel gave back the unit the second did
// not take, which moved the TAT beneath the second's place; the second's
// Cancel then freed the request's unit too (3 left, on both buckets). Now
// the first gives back nothing, as something was counted after it.
func TestCancelAfterAnEarlierCancel(t *testing.T) {
	for _, alg := range []floodgate.Algorithm{floodgate.TokenBucket, floodgate.LeakyBucket} {
		t.Run(string(alg), func(t *testing.T) {
			m, clock := newVirtual()
			limit := floodgate.Limit{Algorithm: alg, Rate: 2, Period: time.Microsecond, Burst: 3}
			first, second := reserve(t, m, limit, 2), reserve(t, m, limit, 1)
			first.Cancel()
			clock.Advance(time.Microsecond)
			if d, err := m.AllowN(t.Context(), "k", limit, 1); err != nil || !d.Allowed {
				t.Fatalf("the request a µs later: %+v, %v", d, err)
			}
			second.Cancel()
			if got := remaining(t, m, limit); got > 2 {
				t.Fatalf("after both Cancels %d remaining; a key that saw only the request has 2", got)
			}
		})
	}
}
