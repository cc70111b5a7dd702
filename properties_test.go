package floodgate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

// The properties of DESIGN.md, checked for every algorithm over random
// limits and random arrival sequences on a virtual clock:
//
//   - every decision equals the reference model's (model_test.go);
//   - the algorithm's upper bound holds over every interval;
//   - RetryAfter is honest and tight: the same request passes at
//     now+RetryAfter if nothing else came, and not a microsecond earlier;
//   - Remaining = r: r more unit requests at the same instant pass, the next
//     does not;
//   - after idling ResetAfter a full burst passes, and not a microsecond earlier;
//   - a cost above what the limit can ever admit is denied with a negative
//     RetryAfter and consumes nothing.

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// arrival is one step of a generated sequence.
type arrival struct {
	gap  int64 // µs since the previous arrival
	cost int64
}

func genLimit(t *rapid.T, alg floodgate.Algorithm) floodgate.Limit {
	periods := []time.Duration{time.Microsecond, 3 * time.Microsecond, 10 * time.Microsecond,
		time.Millisecond, 7 * time.Millisecond, time.Second, time.Minute}
	l := floodgate.Limit{
		Algorithm: alg,
		Rate:      rapid.Int64Range(1, 12).Draw(t, "rate"),
		Period:    rapid.SampledFrom(periods).Draw(t, "period"),
	}
	if alg == floodgate.TokenBucket || alg == floodgate.LeakyBucket {
		l.Burst = rapid.Int64Range(0, 15).Draw(t, "burst")
	}
	return l
}

func capacity(l floodgate.Limit) int64 {
	if l.Algorithm == floodgate.TokenBucket || l.Algorithm == floodgate.LeakyBucket {
		return burstOf(l)
	}
	return l.Rate
}

func genArrivals(t *rapid.T, l floodgate.Limit) []arrival {
	p := periodMicros(l)
	interval := max(1, p/l.Rate)
	gap := rapid.OneOf(
		rapid.Just(int64(0)),
		rapid.Int64Range(0, 2*interval),
		rapid.Int64Range(0, 2*p),
	)
	cost := rapid.OneOf(rapid.Just(int64(1)), rapid.Int64Range(0, capacity(l)+1))
	n := rapid.IntRange(1, 30).Draw(t, "n")
	out := make([]arrival, n)
	for i := range out {
		out[i] = arrival{gap: gap.Draw(t, "gap"), cost: cost.Draw(t, "cost")}
	}
	return out
}

// fataler is what both *testing.T and *rapid.T offer.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// run is a limiter on a virtual clock with the history it was fed.
type run struct {
	limit   floodgate.Limit
	clock   *floodgate.ManualClock
	mem     *floodgate.Memory
	start   time.Time
	now     int64 // µs since start
	history []step
}

type step struct {
	at, cost int64
	d        floodgate.Decision
}

func newRun(l floodgate.Limit, start time.Time) *run {
	clk := floodgate.NewManualClock(start)
	return &run{limit: l, clock: clk, mem: floodgate.NewMemory(floodgate.WithClock(clk)), start: start}
}

func (r *run) at(us int64) {
	r.now = us
	r.clock.Set(r.start.Add(time.Duration(us) * time.Microsecond))
}

func (r *run) do(tb fataler, cost int64) floodgate.Decision {
	d, err := r.mem.AllowN(context.Background(), "key", r.limit, cost)
	if err != nil {
		tb.Fatalf("AllowN(%v, cost %d): %v", r.limit, cost, err)
	}
	r.history = append(r.history, step{at: r.now, cost: cost, d: d})
	return d
}

// replay builds a fresh run that has seen the first n steps of r.
func (r *run) replay(tb fataler, n int) *run {
	c := newRun(r.limit, r.start)
	for _, s := range r.history[:n] {
		c.at(s.at)
		c.do(tb, s.cost)
	}
	return c
}

func (r *run) admitted() []admitted {
	var out []admitted
	for _, s := range r.history {
		if s.d.Allowed && s.cost > 0 {
			out = append(out, admitted{at: r.startMicros() + s.at, cost: s.cost, delay: us(s.d.Delay)})
		}
	}
	return out
}

func (r *run) startMicros() int64 { return r.start.UnixMicro() }

func us(d time.Duration) int64 { return int64(d / time.Microsecond) }

func TestProperties(t *testing.T) {
	for _, alg := range floodgate.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) { checkSequence(t, alg) })
		})
	}
}

func checkSequence(t *rapid.T, alg floodgate.Algorithm) {
	l := genLimit(t, alg)
	offset := rapid.Int64Range(0, 10*periodMicros(l)).Draw(t, "offset")
	r := newRun(l, epoch.Add(time.Duration(offset)*time.Microsecond))
	for i, a := range genArrivals(t, l) {
		r.at(r.now + a.gap)
		want := modelDecide(l, r.admitted(), r.startMicros()+r.now, a.cost)
		d := r.do(t, a.cost)
		ctx := fmt.Sprintf("step %d (t=%dµs, cost %d) under %v: %+v", i, r.now, a.cost, l, d)
		checkAgainstModel(t, ctx, d, want)
		checkShape(t, ctx, l, a.cost, d)
		checkRetryAfter(t, ctx, r, len(r.history))
		checkRemaining(t, ctx, r, len(r.history))
		checkResetAfter(t, ctx, r, len(r.history))
	}
	checkBound(t, l, r.admitted())
}

func checkAgainstModel(t *rapid.T, ctx string, d floodgate.Decision, want modelDecision) {
	if d.Allowed != want.allowed {
		t.Fatalf("%s: allowed %v, the reference says %v", ctx, d.Allowed, want.allowed)
	}
	if d.Remaining != want.remaining {
		t.Fatalf("%s: remaining %d, the reference says %d", ctx, d.Remaining, want.remaining)
	}
	if us(d.Delay) != want.delay {
		t.Fatalf("%s: delay %dµs, the reference says %dµs", ctx, us(d.Delay), want.delay)
	}
}

// checkShape checks what holds of every decision on its own.
func checkShape(t *rapid.T, ctx string, l floodgate.Limit, cost int64, d floodgate.Decision) {
	switch {
	case d.Limit != capacity(l):
		t.Fatalf("%s: Limit %d, want %d", ctx, d.Limit, capacity(l))
	case d.Remaining < 0 || d.Remaining > d.Limit:
		t.Fatalf("%s: Remaining outside [0, Limit]", ctx)
	case d.Allowed && d.RetryAfter != 0:
		t.Fatalf("%s: allowed with a RetryAfter", ctx)
	case !d.Allowed && cost > capacity(l) && d.RetryAfter >= 0:
		t.Fatalf("%s: a cost above capacity must have a negative RetryAfter", ctx)
	case !d.Allowed && cost <= capacity(l) && d.RetryAfter <= 0:
		t.Fatalf("%s: denied without a positive RetryAfter", ctx)
	case d.ResetAfter < 0 || d.Delay < 0:
		t.Fatalf("%s: negative ResetAfter or Delay", ctx)
	case d.Delay != 0 && l.Algorithm != floodgate.LeakyBucket:
		t.Fatalf("%s: Delay from %s", ctx, l.Algorithm)
	}
}

// checkRetryAfter: the denied request of step n passes at now+RetryAfter if
// nothing else came, and is still denied a microsecond earlier.
func checkRetryAfter(t *rapid.T, ctx string, r *run, n int) {
	last := r.history[n-1]
	if last.d.Allowed || last.d.RetryAfter < 0 {
		if last.d.RetryAfter < 0 { // nothing consumed: the same history without it agrees
			probe := r.replay(t, n-1)
			probe.at(last.at)
			if d := probe.do(t, 0); d.Remaining != last.d.Remaining {
				t.Fatalf("%s: an impossible cost changed Remaining to %d", ctx, d.Remaining)
			}
		}
		return
	}
	retry := us(last.d.RetryAfter)
	probe := r.replay(t, n-1)
	probe.at(last.at + retry)
	if d := probe.do(t, last.cost); !d.Allowed {
		t.Fatalf("%s: retried after RetryAfter=%dµs and was denied: %+v", ctx, retry, d)
	}
	probe = r.replay(t, n-1)
	probe.at(last.at + retry - 1)
	if d := probe.do(t, last.cost); d.Allowed {
		t.Fatalf("%s: RetryAfter=%dµs is not tight: passed 1µs earlier", ctx, retry)
	}
}

// checkRemaining: Remaining more unit requests pass at the same instant and
// the next one does not.
func checkRemaining(t *rapid.T, ctx string, r *run, n int) {
	last := r.history[n-1]
	probe := r.replay(t, n)
	for i := int64(0); i < last.d.Remaining; i++ {
		if d := probe.do(t, 1); !d.Allowed {
			t.Fatalf("%s: Remaining=%d but unit request %d was denied", ctx, last.d.Remaining, i+1)
		}
	}
	if d := probe.do(t, 1); d.Allowed {
		t.Fatalf("%s: Remaining=%d but one more unit request passed", ctx, last.d.Remaining)
	}
}

// checkResetAfter: idle for ResetAfter and the key is full again (a full
// burst passes); a microsecond earlier it is not.
func checkResetAfter(t *rapid.T, ctx string, r *run, n int) {
	last := r.history[n-1]
	reset := us(last.d.ResetAfter)
	probe := r.replay(t, n)
	probe.at(last.at + reset)
	for i := int64(0); i < last.d.Limit; i++ {
		if d := probe.do(t, 1); !d.Allowed {
			t.Fatalf("%s: after ResetAfter=%dµs unit request %d of a full burst of %d was denied", ctx, reset, i+1, last.d.Limit)
		}
	}
	if reset == 0 {
		return
	}
	probe = r.replay(t, n)
	probe.at(last.at + reset - 1)
	if d := probe.do(t, 0); d.Remaining == d.Limit {
		t.Fatalf("%s: ResetAfter=%dµs is not tight: full 1µs earlier", ctx, reset)
	}
}

// checkBound checks the algorithm's guarantee over every interval.
func checkBound(t *rapid.T, l floodgate.Limit, adm []admitted) {
	p := periodMicros(l)
	for i := range adm {
		for j := i; j < len(adm); j++ {
			span := adm[j].at - adm[i].at
			sum := int64(0)
			for _, a := range adm[i : j+1] {
				sum += a.cost
			}
			switch l.Algorithm {
			case floodgate.TokenBucket, floodgate.LeakyBucket:
				// sum ≤ Burst + Rate·span/Period
				if sum*p > burstOf(l)*p+l.Rate*span {
					t.Fatalf("%d units in %dµs exceed burst %d + rate %d/%dµs", sum, span, burstOf(l), l.Rate, p)
				}
			case floodgate.SlidingLog:
				if span < p && sum > l.Rate {
					t.Fatalf("%d units within %dµs < period %dµs exceed rate %d", sum, span, p, l.Rate)
				}
			case floodgate.FixedWindow, floodgate.SlidingWindow:
				if floorDivModel(adm[i].at, p) == floorDivModel(adm[j].at, p) && sum > l.Rate {
					t.Fatalf("%d units in one aligned window exceed rate %d", sum, l.Rate)
				}
				if span < p && sum > 2*l.Rate {
					t.Fatalf("%d units within %dµs exceed 2·rate %d", sum, span, l.Rate)
				}
			}
		}
	}
	if l.Algorithm == floodgate.LeakyBucket {
		checkSpacing(t, l, adm)
	}
}

// checkSpacing: the leaky bucket lets requests leave Period/Rate per unit
// apart (delays are rounded up to whole µs, so allow under 1µs).
func checkSpacing(t *rapid.T, l floodgate.Limit, adm []admitted) {
	for i := 1; i < len(adm); i++ {
		prev, cur := adm[i-1], adm[i]
		gap := (cur.at + cur.delay) - (prev.at + prev.delay)
		if (gap+1)*l.Rate <= prev.cost*periodMicros(l) {
			t.Fatalf("departures %dµs apart after a request of cost %d under %v", gap, prev.cost, l)
		}
	}
}
