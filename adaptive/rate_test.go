package adaptive

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

var quiet = slog.New(slog.DiscardHandler)

// rateOpts are the options of the tests below: a 100ms p99 target,
// evaluated every second, with the defaults' 3s window and cool-down.
func rateOpts(clock floodgate.Clock) RateOptions {
	return RateOptions{TargetLatency: 100 * time.Millisecond, Clock: clock, Logger: quiet}
}

func newTestRate(t interface{ Fatal(...any) }, inner floodgate.Limiter, opts RateOptions) *RateLimiter {
	r, err := NewRate(inner, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRateOptionsAreChecked(t *testing.T) {
	inner := floodgate.NewMemory()
	ok := func(o RateOptions) RateOptions { o.TargetLatency = time.Second; return o }
	for _, c := range []struct {
		opts RateOptions
		want string
	}{
		{RateOptions{}, "TargetLatency"},
		{ok(RateOptions{MaxErrorRatio: 1}), "MaxErrorRatio"},
		{ok(RateOptions{Hysteresis: 1.5}), "Hysteresis"},
		{ok(RateOptions{Floor: -0.1}), "Floor"},
		{ok(RateOptions{Decrease: 1}), "Decrease"},
		{ok(RateOptions{Increase: 2}), "Increase"},
		{ok(RateOptions{Interval: 9 * time.Millisecond}), "Interval"},
		{ok(RateOptions{CoolDown: -time.Second}), "CoolDown"},
		{ok(RateOptions{CoolDown: time.Millisecond}), "CoolDown"},
		{ok(RateOptions{MinCalls: -1}), "MinCalls"},
		{ok(RateOptions{SharedTTL: time.Millisecond}), "SharedTTL"},
		{ok(RateOptions{Shared: newMemShared(nil)}), "Node"},
	} {
		_, err := NewRate(inner, c.opts)
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewRate(%+v) = %v, want ErrInvalidOptions naming %s", c.opts, err, c.want)
		}
	}
	if _, err := NewRate(nil, ok(RateOptions{})); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("a nil inner Limiter: %v", err)
	}
}

func TestScale(t *testing.T) {
	tb := floodgate.PerSecond(100)
	for _, c := range []struct {
		limit floodgate.Limit
		steps uint32
		want  floodgate.Limit
	}{
		{tb, FactorSteps, tb},
		{tb, 32, floodgate.PerSecond(50)},
		{tb.WithBurst(30), 32, floodgate.PerSecond(50).WithBurst(15)},
		{tb, 7, floodgate.PerSecond(10)},                                              // ⌊100·7/64⌋
		{floodgate.PerSecond(3).WithBurst(1), 1, floodgate.PerSecond(1).WithBurst(1)}, // never below 1
		{floodgate.PerSecond(0), 32, floodgate.PerSecond(0)},                          // left for the store to reject
		{tb.WithBurst(-1), 32, tb.WithBurst(-1)},
	} {
		if got := scale(c.limit, c.steps); got != c.want {
			t.Errorf("scale(%s, %d/64) = %s, want %s", c.limit, c.steps, got, c.want)
		}
	}
}

func TestQuantise(t *testing.T) {
	for _, c := range []struct {
		f, floor float64
		want     uint32
	}{
		{1, 0.1, 64}, {0.5, 0.1, 32}, {0.7 * 0.7, 0.1, 31}, {0.35, 0.1, 22},
		{0.01, 0.1, 7}, // the floor, rounded up: 7/64 ≥ 0.1
		{0.01, 0.001, 1},
	} {
		if got := quantise(c.f, c.floor); got != c.want {
			t.Errorf("quantise(%v, floor %v) = %d/64, want %d/64", c.f, c.floor, got, c.want)
		}
	}
}

// queueBackend serves a number of requests per second from a FIFO queue:
// a request that finds q others queued takes base (with jitter) plus
// q/capacity. Its capacity is what nobody wrote down.
type queueBackend struct {
	capacity float64
	queued   float64
	rng      *rand.Rand
}

func (b *queueBackend) call() time.Duration {
	wait := time.Duration(b.queued / b.capacity * float64(time.Second))
	b.queued++
	return 15*time.Millisecond + time.Duration(b.rng.Int64N(int64(10*time.Millisecond))) + wait
}

func (b *queueBackend) serve(d time.Duration) {
	b.queued = max(0, b.queued-b.capacity*d.Seconds())
}

// rateTick is the state of a simulation after one tick.
type rateTick struct {
	at     time.Duration
	factor float64
	p99    time.Duration
}

// simulate offers 3000 requests per second to a limit of 1000 per second
// through r for d, in ticks of 10ms, each admitted one calling b, and
// returns the state after each tick.
func simulate(t *testing.T, r *RateLimiter, clock *floodgate.ManualClock, b *queueBackend, d time.Duration) []rateTick {
	const tick = 10 * time.Millisecond
	limit := floodgate.PerSecond(1000).WithBurst(100)
	var out []rateTick
	for at := time.Duration(0); at < d; at += tick {
		for range 30 {
			dec, err := r.AllowN(t.Context(), "backend", limit, 1)
			if err != nil {
				t.Fatal(err)
			}
			if dec.Allowed {
				r.Observe(b.call(), nil)
			}
		}
		b.serve(tick)
		clock.Advance(tick)
		out = append(out, rateTick{at: clock.Now().Sub(healthEpoch), factor: r.Factor(), p99: r.Health().Snapshot().P99})
	}
	return out
}

// A backend that can take 1500 requests per second, then 400, then 1500
// again, behind a limit of 1000 per second offered three times that: the
// factor falls within an Interval of the p99 crossing the target, falls
// no faster than one decrease per cool-down, settles around what the
// backend can take, and grows back to 1 once it recovers.
func TestRateFollowsBackendCapacity(t *testing.T) {
	clock := floodgate.NewManualClock(healthEpoch)
	r := newTestRate(t, floodgate.NewMemory(floodgate.WithClock(clock)), rateOpts(clock))
	b := &queueBackend{capacity: 1500, rng: rand.New(rand.NewPCG(17, 3))}
	var run []rateTick
	phase := func(capacity float64, d time.Duration) []rateTick {
		b.capacity = capacity
		ticks := simulate(t, r, clock, b, d)
		run = append(run, ticks...)
		return ticks
	}
	healthy := phase(1500, 20*time.Second)
	dropped := phase(400, 120*time.Second)
	recovered := phase(1500, 60*time.Second)

	if f := minFactor(healthy); f != 1 {
		t.Fatalf("healthy backend: the factor fell to %v", f)
	}
	crossed, fell := -1, -1
	for i, tk := range dropped {
		if crossed < 0 && tk.p99 > 100*time.Millisecond {
			crossed = i
		}
		if fell < 0 && tk.factor < 1 {
			fell = i
		}
	}
	if crossed < 0 || fell < crossed || dropped[fell].at-dropped[crossed].at > DefaultInterval {
		t.Fatalf("p99 above the target at tick %d, factor below 1 at tick %d: want within one Interval", crossed, fell)
	}
	checkDecreasesSpaced(t, run, 3*time.Second)
	if f := minFactor(run); f < DefaultFloor {
		t.Fatalf("factor %v below the floor %v", f, DefaultFloor)
	}
	// Settled: over the last minute of the drop the admitted rate, 1000·f,
	// saws around the 400 the backend takes: up by Increase per Interval
	// past it, then down by one decrease for the overshoot and at most one
	// more, a cool-down later, while the backend drains the backlog the
	// overshoot left. So f stays within [0.4·Decrease², 0.4 + 2·Increase],
	// and on average near the backend's capacity.
	last := dropped[len(dropped)-6000:]
	lo, hi, mean := minFactor(last), maxFactor(last), meanFactor(last)
	if lo < 0.4*DefaultDecrease*DefaultDecrease || hi > 0.4+2*DefaultIncrease || mean < 0.3 {
		t.Fatalf("settled factor in [%v, %v], mean %v; want within [0.4·Decrease², 0.4 + 2·Increase], mean ≥ 0.3",
			lo, hi, mean)
	}
	if f := recovered[len(recovered)-1].factor; f != 1 {
		t.Fatalf("a minute after the backend recovered, the factor is %v, want 1", f)
	}
	back := recovered[0].at
	for _, tk := range recovered {
		if tk.factor == 1 {
			back = tk.at - back
			break
		}
	}
	t.Logf("p99 crossed at +%s, first decrease at +%s; settled factor in [%v, %v], mean %.3f; back to 1 %s after the recovery",
		dropped[crossed].at, dropped[fell].at, lo, hi, mean, back)
}

func minFactor(ticks []rateTick) float64 {
	f := 1.0
	for _, tk := range ticks {
		f = min(f, tk.factor)
	}
	return f
}

func meanFactor(ticks []rateTick) float64 {
	sum := 0.0
	for _, tk := range ticks {
		sum += tk.factor
	}
	return sum / float64(len(ticks))
}

func maxFactor(ticks []rateTick) float64 {
	f := 0.0
	for _, tk := range ticks {
		f = max(f, tk.factor)
	}
	return f
}

// checkDecreasesSpaced fails unless the factor never fell twice within
// coolDown.
func checkDecreasesSpaced(t interface{ Fatalf(string, ...any) }, ticks []rateTick, coolDown time.Duration) {
	last := time.Duration(-1)
	for i := 1; i < len(ticks); i++ {
		if ticks[i].factor >= ticks[i-1].factor {
			continue
		}
		if last >= 0 && ticks[i].at-last < coolDown {
			t.Fatalf("decreases at +%s and +%s, closer than the cool-down %s", last, ticks[i].at, coolDown)
		}
		last = ticks[i].at
	}
}

// For any options and any sequence of outcomes, the factor stays in
// [Floor, 1] and two decreases are at least CoolDown apart.
func TestRateFactorProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := floodgate.NewManualClock(healthEpoch)
		interval := time.Duration(rapid.IntRange(10, 2000).Draw(t, "interval ms")) * time.Millisecond
		opts := RateOptions{
			TargetLatency: 100 * time.Millisecond,
			MaxErrorRatio: rapid.Float64Range(0.01, 0.5).Draw(t, "max error ratio"),
			Floor:         rapid.Float64Range(0.001, 1).Draw(t, "floor"),
			Decrease:      rapid.Float64Range(0.01, 0.99).Draw(t, "decrease"),
			Increase:      rapid.Float64Range(0.001, 1).Draw(t, "increase"),
			Interval:      interval,
			CoolDown:      interval * time.Duration(rapid.IntRange(1, 5).Draw(t, "cool-down intervals")),
			MinCalls:      rapid.IntRange(1, 10).Draw(t, "min calls"),
			Clock:         clock,
			Logger:        quiet,
		}
		r := newTestRate(t, floodgate.NewMemory(floodgate.WithClock(clock)), opts)
		var ticks []rateTick
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			clock.Advance(time.Duration(rapid.Int64Range(0, int64(3*interval)).Draw(t, "advance")))
			for range rapid.IntRange(0, 5).Draw(t, "calls") {
				lat := rapid.SampledFrom([]time.Duration{time.Millisecond, 90 * time.Millisecond, time.Second}).Draw(t, "latency")
				r.Health().Record(lat, rapid.Bool().Draw(t, "failed"))
			}
			if _, err := r.AllowN(context.Background(), "k", floodgate.PerSecond(100), 0); err != nil {
				t.Fatal(err)
			}
			f := r.Factor()
			if f < opts.Floor || f > 1 {
				t.Fatalf("factor %v outside [%v, 1]", f, opts.Floor)
			}
			ticks = append(ticks, rateTick{at: clock.Now().Sub(healthEpoch), factor: f})
		}
		checkDecreasesSpaced(t, ticks, opts.CoolDown)
	})
}

// memShared is a SharedFactor in memory, on a clock, counting reads.
type memShared struct {
	clock floodgate.Clock
	mu    sync.Mutex
	nodes map[string]memFactor
	reads int
}

type memFactor struct {
	f     float64
	until time.Time
}

func newMemShared(clock floodgate.Clock) *memShared {
	return &memShared{clock: clock, nodes: map[string]memFactor{}}
}

func (s *memShared) Publish(_ context.Context, node string, f float64, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[node] = memFactor{f, s.clock.Now().Add(ttl)}
	return nil
}

func (s *memShared) Min(context.Context) (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	m := 1.0
	for _, n := range s.nodes {
		if s.clock.Now().Before(n.until) {
			m = min(m, n.f)
		}
	}
	return m, nil
}

// Two nodes share a factor: the healthy one follows the struggling one
// down, reading the fleet once per Interval however many requests it
// decides.
func TestSharedFactorTakesTheMinimum(t *testing.T) {
	clock := floodgate.NewManualClock(healthEpoch)
	shared := newMemShared(clock)
	checkFleetShrinksTogether(t, clock, shared)
	if shared.reads > 2*15 {
		t.Fatalf("%d reads of the shared factor for two nodes over 15 Intervals, want at most one per node per Interval", shared.reads)
	}
}

// checkFleetShrinksTogether runs two nodes on shared for 10s, one seeing
// a slow backend and one a fast one: the fast one follows the slow one
// down, and goes back to its own factor once the other has stopped
// publishing for SharedTTL (3s).
func checkFleetShrinksTogether(t *testing.T, clock *floodgate.ManualClock, shared SharedFactor) {
	node := func(name string) *RateLimiter {
		o := rateOpts(clock)
		o.Shared, o.Node = shared, name
		return newTestRate(t, floodgate.NewMemory(floodgate.WithClock(clock)), o)
	}
	sick, well := node("sick"), node("well")
	limit := floodgate.PerSecond(100)
	ctx := t.Context()
	for range 10 {
		for range 100 {
			sick.Observe(time.Second, nil)
			well.Observe(time.Millisecond, nil)
			sick.AllowN(ctx, "k", limit, 1)
			well.AllowN(ctx, "k", limit, 1)
		}
		clock.Advance(time.Second)
	}
	sick.AllowN(ctx, "k", limit, 0)
	well.AllowN(ctx, "k", limit, 0)
	if sick.Factor() >= 1 || well.Factor() != sick.Factor() {
		t.Fatalf("factors: sick %v, well %v; want the well node at the sick one's, below 1", sick.Factor(), well.Factor())
	}
	for range 4 {
		clock.Advance(time.Second)
		well.Observe(time.Millisecond, nil)
		well.AllowN(ctx, "k", limit, 0)
	}
	if f := well.Factor(); f != 1 {
		t.Fatalf("after the sick node's TTL, the well node's factor is %v, want its own, 1", f)
	}
}

// A limit whose scaled bucket the stores cannot count exactly (its rate
// shares no factor with the period) is decided with the rate rounded down
// to one they can.
func TestRateScalesUncountableBuckets(t *testing.T) {
	clock := floodgate.NewManualClock(healthEpoch)
	r := newTestRate(t, floodgate.NewMemory(floodgate.WithClock(clock)), rateOpts(clock))
	setFactor(r, 33.0/64)
	limit := floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1023 << 20, Period: 1 << 40 * time.Microsecond}
	if scale(limit, 33).Validate() == nil {
		t.Fatal("the test's limit scales to a countable one; pick another")
	}
	d, err := r.AllowN(t.Context(), "k", limit, 1)
	if err != nil || !d.Allowed || d.Limit > (1023<<20)*33/64 {
		t.Fatalf("got %+v, %v; want an admission under at most the scaled rate", d, err)
	}
}

// setFactor puts r's factor at f, as if the loop had taken it there; it
// stays while no outcomes are recorded (fewer than MinCalls: no verdict).
func setFactor(r *RateLimiter, f float64) {
	r.mu.Lock()
	r.own = f
	r.steps.Store(quantise(f, r.opts.Floor))
	r.mu.Unlock()
}

// BenchmarkRateAllowN is the cost of the adaptive layer: a decision of
// the memory store on one key alone, and through a RateLimiter at a
// factor below 1.
func BenchmarkRateAllowN(b *testing.B) {
	ctx := context.Background()
	limit := floodgate.PerSecond(1_000_000_000) // never denies: the decision's cost alone
	mem := floodgate.NewMemory()
	r, err := NewRate(floodgate.NewMemory(), RateOptions{TargetLatency: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	setFactor(r, 40.0/64)
	if _, err := r.AllowN(ctx, "k", limit, 1); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		l    floodgate.Limiter
	}{{"memory", mem}, {"adaptive", r}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.l.AllowN(ctx, "k", limit, 1)
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.l.AllowN(ctx, "k", limit, 1)
				}
			})
		})
	}
}
