package algo

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// key is one key's state under one limit, whatever its algorithm, so that
// the properties below read the same for all five.
type key struct {
	p   Params
	s   State
	log Log
}

func (k *key) decide(now, cost int64, commit bool) Result {
	var r Result
	if k.p.Kind == SlidingLog {
		l := &k.log
		if !commit {
			l = k.log.clone()
		}
		DecideLog(&k.p, l, now, cost, true, &r)
		return r
	}
	s := &k.s
	if !commit {
		scratch := k.s
		s = &scratch
	}
	Decide(&k.p, s, now, cost, &r)
	return r
}

func (k *key) adjust(now, delta int64) int64 {
	if k.p.Kind == SlidingLog {
		return AdjustLog(&k.p, &k.log, now, delta)
	}
	return Adjust(&k.p, &k.s, now, delta)
}

func (k *key) clone() *key {
	c := *k
	c.log = *k.log.clone()
	return &c
}

func (l *Log) clone() *Log {
	c := *l
	c.ring = slices.Clone(l.ring)
	return &c
}

// capacity is what an empty key has Remaining.
func (k *key) capacity() int64 {
	if k.p.Kind.IsBucket() {
		return k.p.Burst
	}
	return k.p.Rate
}

// probe is what a key answers to a few requests at now and later, without
// changing it: two keys that answer alike here decide alike.
func (k *key) probe(now int64) []Result {
	var out []Result
	for _, later := range []int64{0, 1, k.p.Period / 3, k.p.Period, 2 * k.p.Period} {
		for _, cost := range []int64{0, 1, max(1, k.capacity()/2), k.capacity()} {
			out = append(out, k.decide(now+later, cost, false))
		}
	}
	return out
}

func genKey(t *rapid.T) *key {
	kind := Kind(rapid.IntRange(int(TokenBucket), int(SlidingWindow)).Draw(t, "kind"))
	var p Params
	var err error
	if rapid.IntRange(0, 9).Draw(t, "huge") == 0 {
		// Counts near 2^44; a bucket's period a multiple of its rate, which
		// keeps its horizon countable.
		rate := rapid.Int64Range(1<<30, 1<<44).Draw(t, "rate")
		period := int64(86_400_000_000)
		if kind.IsBucket() {
			period = rate * rapid.Int64Range(1, 30).Draw(t, "µs per unit")
		}
		p, err = NewParams(kind, rate, period, 0)
	} else {
		p, err = NewParams(kind, rapid.Int64Range(1, 20).Draw(t, "rate"),
			rapid.SampledFrom([]int64{1, 7, 1000, 3000, 1_000_000}).Draw(t, "period"),
			rapid.Int64Range(0, 25).Draw(t, "burst"))
	}
	if err != nil {
		t.Fatal(err)
	}
	return &key{p: p}
}

// genDelta draws adjustments of every size: small ones around the
// capacity, huge ones that hit the caps, and the extremes.
func genDelta(t *rapid.T, k *key, label string) int64 {
	c := k.capacity()
	d := rapid.OneOf(
		rapid.Int64Range(-2*c, 2*c),
		rapid.Int64Range(-MaxValue, MaxValue),
		rapid.SampledFrom([]int64{-MaxValue, -1, 1, MaxValue}),
	).Draw(t, label)
	return d
}

// run drives k through random decisions and adjustments on a clock that
// only moves forward and returns the time it ends at; check sees each step.
func run(t *rapid.T, k *key, check func(now int64)) int64 {
	now := int64(1_772_366_400_000_000) // 2026-03-01
	for i, n := 0, rapid.IntRange(0, 12).Draw(t, "steps"); i < n; i++ {
		now += rapid.Int64Range(0, 2*k.p.Period).Draw(t, "wait")
		if rapid.Bool().Draw(t, "adjust") {
			k.adjust(now, genDelta(t, k, "delta"))
		} else {
			k.decide(now, rapid.Int64Range(0, k.capacity()+1).Draw(t, "cost"), true)
		}
		if check != nil {
			check(now)
		}
	}
	return now
}

// Every stored quantity stays within the ranges internal/algo promises, so
// that the Redis scripts, in doubles, stay exact.
func TestAdjustKeepsValuesInRange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := genKey(t)
		run(t, k, func(now int64) {
			switch {
			case k.p.Kind.IsBucket():
				if b := k.p.backlog(&k.s, now); b > k.p.maxBacklog() {
					t.Fatalf("backlog %d ticks beyond the cap %d", b, k.p.maxBacklog())
				}
			case k.p.Kind == SlidingLog:
				if k.log.Total() > MaxValue || int64(k.log.Len()) > k.p.Rate {
					t.Fatalf("log of %d entries totalling %d, rate %d", k.log.Len(), k.log.Total(), k.p.Rate)
				}
			default:
				if k.s.B < 0 || k.s.B > MaxValue || k.s.C < 0 || k.s.C > MaxValue {
					t.Fatalf("window counts %+v out of [0, 2^50]", k.s)
				}
			}
		})
	})
}

// A charge is unconditional: it takes d off Remaining, or all of it.
func TestChargeTakesFromRemaining(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := genKey(t)
		now := run(t, k, nil)
		before := k.decide(now, 0, false).Remaining
		d := rapid.Int64Range(1, 3*k.capacity()).Draw(t, "charge")
		k.adjust(now, d)
		if got, want := k.decide(now, 0, false).Remaining, max(0, before-d); got != want {
			t.Fatalf("%s: Remaining %d after a charge of %d from %d, want %d", k.p.Kind, got, d, before, want)
		}
	})
}

// A refund of d gives back at most d units, and never more than an empty
// key has.
func TestRefundNeverPassesEmpty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := genKey(t)
		now := run(t, k, nil)
		before := k.decide(now, 0, false).Remaining
		d := rapid.Int64Range(1, MaxValue).Draw(t, "refund")
		k.adjust(now, -d)
		after := k.decide(now, 0, false)
		if after.Remaining > k.capacity() || after.Remaining > before+d || after.Remaining < before {
			t.Fatalf("%s: Remaining %d → %d after a refund of %d (capacity %d)", k.p.Kind, before, after.Remaining, d, k.capacity())
		}
	})
}

// Refunding everything leaves the key exactly as a key never used, and
// says so.
func TestFullRefundEmptiesTheKey(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := genKey(t)
		now := run(t, k, nil)
		k.adjust(now, -MaxValue) // the two windows of a sliding window may hold 2·MaxValue
		if reset := k.adjust(now, -MaxValue); reset != 0 {
			t.Fatalf("%s: ResetAfter %dµs after refunding everything", k.p.Kind, reset)
		}
		fresh := &key{p: k.p}
		if got, want := k.probe(now), fresh.probe(now); !slices.Equal(got, want) {
			t.Fatalf("%s: after refunding everything\n got  %+v\n want %+v", k.p.Kind, got, want)
		}
	})
}

// Charging d then refunding d at the same instant changes no decision, as
// long as the key had room for d (a bucket's debt is capped, and a log full
// of entries merges the charge into its newest); the window counters take
// any d below their cap.
func TestChargeThenRefundRestores(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := genKey(t)
		now := run(t, k, nil)
		room := k.decide(now, 0, false).Remaining
		if k.p.Kind == FixedWindow || k.p.Kind == SlidingWindow {
			room = min(3*k.capacity(), MaxValue-k.s.B) // below the cap on counts
		}
		if room <= 0 {
			return
		}
		d := rapid.Int64Range(1, room).Draw(t, "d")
		before := k.clone()
		k.adjust(now, d)
		k.adjust(now, -d)
		if got, want := k.probe(now), before.probe(now); !slices.Equal(got, want) {
			t.Fatalf("%s: charge and refund of %d changed the key\n got  %+v\n want %+v", k.p.Kind, d, got, want)
		}
	})
}

// The time Adjust reports is the ResetAfter the next decision reports, and
// RetryAfter stays honest however deep the charge: retrying then passes.
func TestAdjustKeepsDecisionsHonest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := genKey(t)
		now := run(t, k, nil)
		reset := k.adjust(now, genDelta(t, k, "last"))
		if r := k.decide(now, 0, false); r.ResetAfter != reset {
			t.Fatalf("%s: Adjust reported %dµs to reset, the decision %dµs", k.p.Kind, reset, r.ResetAfter)
		}
		cost := rapid.Int64Range(1, k.capacity()).Draw(t, "cost")
		r := k.decide(now, cost, false)
		if r.Allowed {
			return
		}
		if r.RetryAfter < 0 {
			t.Fatalf("%s: cost %d within capacity %d can never pass", k.p.Kind, cost, k.capacity())
		}
		if again := k.decide(now+r.RetryAfter, cost, false); !again.Allowed {
			t.Fatalf("%s: denied again after RetryAfter %dµs: %+v", k.p.Kind, r.RetryAfter, again)
		}
		if full := k.decide(now+r.ResetAfter, 0, false); full.Remaining != k.capacity() {
			t.Fatalf("%s: Remaining %d after ResetAfter %dµs, want %d", k.p.Kind, full.Remaining, r.ResetAfter, k.capacity())
		}
	})
}

// The bucket carries at most MaxAhead of debt: a charge of many bursts
// leaves it empty for one bucket's depth, not longer.
func TestBucketDebtIsCapped(t *testing.T) {
	p, err := NewParams(TokenBucket, 10, 1_000_000, 0) // 10/s: one unit per 100ms
	if err != nil {
		t.Fatal(err)
	}
	var s State
	now := int64(1_000_000_000)
	for _, tc := range []struct {
		name      string
		delta     int64
		wantReset int64
	}{
		{"a charge of 4 units", 4, 400_000},
		{"6 more: empty", 6, 1_000_000},
		{"100 more: capped at MaxAhead", 100, 1_000_002},
		{"a refund of 3", -3, 700_002},
		{"a refund of everything", -MaxValue, 0},
	} {
		if got := Adjust(&p, &s, now, tc.delta); got != tc.wantReset {
			t.Fatalf("%s: reset after %dµs, want %d", tc.name, got, tc.wantReset)
		}
	}
	if s != (State{}) {
		t.Fatalf("state %+v after refunding everything, want the zero State", s)
	}
}

// A clock that went backwards leaves a TAT further ahead than decisions
// read; a charge must not pull it nearer by rewriting it.
func TestChargeLeavesAFarTATAlone(t *testing.T) {
	p, err := NewParams(LeakyBucket, 10, 1_000_000, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1_000_000_000)
	far := State{A: now + 10*p.MaxAhead, B: 0, C: p.Scale}
	s := far
	if reset := Adjust(&p, &s, now, 3); reset != p.MaxAhead || s != far {
		t.Fatalf("reset %d, state %+v; want %d and the state unchanged", reset, s, p.MaxAhead)
	}
}

// The sliding window refunds from the current window, then the previous.
func TestSlidingWindowRefundOrder(t *testing.T) {
	p, err := NewParams(SlidingWindow, 10, 1_000_000, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := int64(5_000_000)
	for _, tc := range []struct {
		name  string
		state State
		delta int64
		want  State
	}{
		{"charge the current window", State{start, 2, 3}, 4, State{start, 6, 3}},
		{"refund within the current window", State{start, 6, 3}, -4, State{start, 2, 3}},
		{"refund past the current window", State{start, 2, 3}, -4, State{start, 0, 1}},
		{"refund past both", State{start, 2, 3}, -9, State{}},
		{"a state one window old is the previous one", State{start - 1_000_000, 5, 9}, -2, State{start, 0, 3}},
		{"a state two windows old counts nothing", State{start - 2_000_000, 5, 9}, -2, State{}},
		{"counts cap at MaxValue", State{start, MaxValue - 1, 0}, 5, State{start, MaxValue, 0}},
	} {
		s := tc.state
		Adjust(&p, &s, start+250_000, tc.delta)
		if s != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, s, tc.want)
		}
	}
}

// The sliding log takes refunds off its newest entries and merges charges
// into its newest entry once it holds Rate entries.
func TestSlidingLogAdjustments(t *testing.T) {
	p, err := NewParams(SlidingLog, 3, 1_000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var l Log
	for _, tc := range []struct {
		name  string
		at    int64
		delta int64
		want  []Entry
	}{
		{"a charge records an entry", 100, 2, []Entry{{100, 2}}},
		{"at the same µs it merges", 100, 1, []Entry{{100, 3}}},
		{"later, a new entry", 200, 1, []Entry{{100, 3}, {200, 1}}},
		{"and another", 300, 1, []Entry{{100, 3}, {200, 1}, {300, 1}}},
		{"Rate entries: merged into the newest, moved", 400, 5, []Entry{{100, 3}, {200, 1}, {400, 6}}},
		{"a refund empties the newest, then takes from the next", 400, -7, []Entry{{100, 3}}},
		{"expired entries are gone before a charge", 1_100, 1, []Entry{{1_100, 1}}},
		{"a refund beyond the log empties it", 1_100, -10, []Entry{}},
	} {
		AdjustLog(&p, &l, tc.at, tc.delta)
		if got := l.Entries(); !slices.Equal(got, tc.want) {
			t.Fatalf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestValidDelta(t *testing.T) {
	for _, tc := range []struct {
		delta int64
		want  bool
	}{{0, true}, {MaxValue, true}, {-MaxValue, true}, {MaxValue + 1, false}, {-MaxValue - 1, false}, {-1 << 63, false}} {
		if got := ValidDelta(tc.delta); got != tc.want {
			t.Errorf("ValidDelta(%d) = %v, want %v", tc.delta, got, tc.want)
		}
	}
}
