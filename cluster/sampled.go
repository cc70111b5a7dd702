package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/algo"
	"github.com/floodgate-io/floodgate/internal/memo"
)

// SampledConfig configures a Sampled limiter.
type SampledConfig struct {
	// Counter holds the global counts: a RedisCounter shared by the
	// fleet, or a MemoryCounter in tests. Required.
	Counter Counter
	// OneIn is 1/p: each admitted request is pushed to the Counter with
	// probability p = 1/OneIn, as OneIn × its cost, so the Counter's
	// expected value is the exact count. 1 pushes every request. Required,
	// between 1 and 2^20.
	OneIn int64
	// Clock is the node's clock (nil: the system clock).
	Clock floodgate.Clock
	// Rand draws which requests are pushed (nil: a PCG seeded at random).
	// Give a seeded rand.NewPCG for a reproducible run.
	Rand rand.Source
}

// sampledMaxOneIn keeps OneIn × cost within what a Counter holds exactly.
const sampledMaxOneIn = 1 << 20

// Sampled is the sampled strategy (probabilistic counting): every admitted
// request is pushed to a shared Counter with probability p, as 1/p times
// its cost; between its pushes a node decides on the total its last push
// returned plus what it admitted since. It serves fixed_window and
// sliding_window limits. It is safe for concurrent use.
type Sampled struct {
	counter Counter
	oneIn   int64
	clock   floodgate.Clock
	store   counterStoreClock
	limits  memo.Cache[floodgate.Limit, algo.Params]

	randMu sync.Mutex
	rand   *rand.Rand

	views counterViews
	swept int // len(views) after the last sweep
}

// NewSampled returns a sampled limiter. It has no periodic work: the
// pushes happen in AllowN.
//
// # Windows
//
// As for NewSynced: windows are numbered on the Counter's clock, learnt
// from every push's reply (offset = the store's time − the midpoint of the
// round trip) and read between replies as the node's clock + offset, so
// clock skew between nodes does not move them; before its first reply a
// node follows its own clock.
//
// # Error bounds
//
// Let R be the limit's Rate per Period, N the nodes, p = 1/OneIn, λ_j the
// rate of units arriving at node j, D a push's round trip, and unit costs.
// The Counter's value X for a window is an unbiased estimate of the units
// A admitted in it, with
//
//	E[X − A] = 0,   Var[X − A] = (1−p)/p · A   (Σ cost² for other costs)
//
// A node decides on known = X at its last reply + its own admissions
// since. It has not seen what the others admitted since that reply: a node
// pushes after a geometric number G of its own admissions (mean 1/p,
// P(G > g) = (1−p)^g). So, per window, with σ = √(R·(1−p)/p), for any
// z > 0 and g ≥ 1, with probability at least 1 − 1/(1+z²) − N·(1−p)^g
// (Cantelli's inequality for X, a union bound for the gaps), with i the
// node that admitted last in the window:
//
//	overshoot  = admitted − R ≤ z·σ + Σ_{j≠i} λ_j·(g/λ_i + D)
//	                          = z·σ + (N−1)·(g + λ·D)       (uniform λ)
//	undershoot = R − admitted ≤ z·σ  (in a window that denied a unit request)
//
// The first term is the sampling error, the second staleness: node i is
// blind for its last g admissions, which take it g/λ_i, while the others
// go on. Small p makes few shared calls but long blind runs; with p = 1
// every request is pushed and only a round trip's arrivals are missed.
// Unlike synced there is no (N−1)·R cap: a node's own admissions are in X
// only in expectation. A sampled request waits for its push: one round
// trip, bounded by the Counter's timeout.
//
// # Shared traffic
//
// p shared calls per admitted request, each one script call; plus one read
// for a key that has had no reply for a whole Period (see below).
//
// # Store unavailable
//
// A push that fails does not fail its (already decided) request: its
// amount is owed and sent with the key's next push, and the node keeps
// deciding on the last total plus its local count. Once a key has had no
// successful reply for a whole Period of the limit, AllowN first pushes
// (or reads) synchronously and, if that fails too, returns an error
// wrapping floodgate.ErrStoreUnavailable, so that a failure policy
// (package failover) takes over.
func NewSampled(cfg SampledConfig) (*Sampled, error) {
	switch {
	case cfg.Counter == nil:
		return nil, errors.New("cluster: SampledConfig.Counter is nil")
	case cfg.OneIn < 1 || cfg.OneIn > sampledMaxOneIn:
		return nil, fmt.Errorf("cluster: SampledConfig.OneIn must be between 1 and %d (p = 1/OneIn), got %d", sampledMaxOneIn, cfg.OneIn)
	}
	s := &Sampled{counter: cfg.Counter, oneIn: cfg.OneIn, clock: cfg.Clock, views: counterViews{m: map[counterViewKey]*counterView{}}}
	if s.clock == nil {
		s.clock = counterSystemClock{}
	}
	src := cfg.Rand
	if src == nil {
		src = rand.NewPCG(rand.Uint64(), rand.Uint64())
	}
	s.rand = rand.New(src)
	s.store.clock = s.clock
	return s, nil
}

// AllowN implements floodgate.Limiter. It calls the Counter for a sampled
// admitted request, and for a key whose last reply is a Period old.
func (s *Sampled) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	if err := floodgate.ValidateRequest(key, cost); err != nil {
		return floodgate.Decision{}, err
	}
	p, err := s.limits.Get(limit, func(l floodgate.Limit) (algo.Params, error) { return s.params(l) })
	if err != nil {
		return floodgate.Decision{}, err
	}
	k := counterViewKey{key, p.Period}
	for {
		v := s.view(k)
		if err := s.refresh(ctx, k, v); err != nil {
			return floodgate.Decision{}, err
		}
		d, f, push, ok := s.decide(v, &p, cost)
		if !ok {
			continue // a sweep dropped the view just now
		}
		if push {
			_ = s.push(ctx, k, v, f) // a failed push is owed, see NewSampled
		}
		return d, nil
	}
}

// decide makes the decision on the view and, for a sampled admitted
// request, prepares its push. ok is false when the view was dropped.
func (s *Sampled) decide(v *counterView, p *algo.Params, cost int64) (d floodgate.Decision, f counterFlight, push, ok bool) {
	now := s.store.now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gone {
		return d, f, false, false
	}
	v.roll(counterWindowOf(now, p.Period))
	v.used = v.window
	d = v.decide(p, now, cost)
	if d.Allowed && cost > 0 && s.sample() {
		return d, s.take(v, s.oneIn*cost), true, true
	}
	return d, f, false, true
}

// params compiles a limit and checks that OneIn × Rate stays exact.
func (s *Sampled) params(l floodgate.Limit) (algo.Params, error) {
	p, err := counterParams("sampled", l)
	if err == nil && p.Rate > counterMaxDelta/s.oneIn {
		err = fmt.Errorf("cluster: sampled: %w: rate %d × OneIn %d exceeds %d, the largest exact count",
			floodgate.ErrInvalidLimit, p.Rate, s.oneIn, int64(counterMaxDelta))
	}
	return p, err
}

// sample draws whether to push: true with probability 1/OneIn.
func (s *Sampled) sample() bool {
	if s.oneIn == 1 {
		return true
	}
	s.randMu.Lock()
	defer s.randMu.Unlock()
	return s.rand.Int64N(s.oneIn) == 0
}

// take prepares a push of amount (plus what is owed) in the view's current
// window; the local counts it replaces move to pending. Call with v.mu held.
func (s *Sampled) take(v *counterView, amount int64) counterFlight {
	f := counterFlight{
		window: v.window,
		moved:  [2]int64{v.cur.local, v.prev.local},
		sent:   [2]int64{amount + v.cur.owed, v.prev.owed},
	}
	v.cur.pending += v.cur.local
	v.prev.pending += v.prev.local
	v.cur.local, v.prev.local, v.cur.owed, v.prev.owed = 0, 0, 0, 0
	return f
}

// push sends a flight and folds the reply into the view; on failure the
// local counts come back and the sent amounts are owed.
func (s *Sampled) push(ctx context.Context, k counterViewKey, v *counterView, f counterFlight) error {
	add := CounterAdd{Key: k.key, Period: time.Duration(k.period) * time.Microsecond,
		Window: f.window, Delta: f.sent[0], PrevDelta: f.sent[1]}
	sent := s.clock.Now()
	reads, err := s.counter.Add(ctx, []CounterAdd{add})
	if err == nil && len(reads) != 1 {
		err = fmt.Errorf("counter replied %d reads for 1 add", len(reads))
	}
	received := s.clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if err != nil {
		v.unsettle(f)
		for i := range 2 {
			if sl := v.slot(f.window - int64(i)); sl != nil {
				sl.owed += f.sent[i]
			}
		}
		return fmt.Errorf("cluster: sampled: push of key %q: %w", k.key, err)
	}
	s.store.learn(reads[0].Now, sent, received)
	v.settle(f, reads[0])
	v.lastOK = received
	return nil
}

// refresh pushes what is owed (or reads) when the key has had no reply for
// a whole period, and fails if the store still does not answer.
func (s *Sampled) refresh(ctx context.Context, k counterViewKey, v *counterView) error {
	now := s.clock.Now()
	v.mu.Lock()
	if now.Sub(v.lastOK) <= time.Duration(k.period)*time.Microsecond {
		v.mu.Unlock()
		return nil
	}
	v.roll(counterWindowOf(s.store.now(), k.period))
	f := s.take(v, 0)
	v.mu.Unlock()
	if err := s.push(ctx, k, v, f); err != nil {
		return fmt.Errorf("%w (no reply for longer than the limit's period)", err)
	}
	return nil
}

// view returns the view of a key, creating it with its last reply set to
// now, so that a new key decides locally for up to a period before it
// needs the store.
func (s *Sampled) view(k counterViewKey) *counterView {
	return s.views.get(k, func() *counterView { return &counterView{lastOK: s.clock.Now()} }, s.sweep)
}

// sweep drops, once the map has doubled since the last sweep, the views
// no decision used in the current or previous window and with nothing to
// send. Call with s.views.mu held.
func (s *Sampled) sweep() {
	if len(s.views.m) < 2*max(s.swept, 64) {
		return
	}
	now := s.store.now()
	for k, v := range s.views.m {
		v.mu.Lock()
		if v.used < counterWindowOf(now, k.period)-1 && v.cur.owed == 0 && v.prev.owed == 0 && v.cur.pending == 0 {
			delete(s.views.m, k)
			v.gone = true
		}
		v.mu.Unlock()
	}
	s.swept = len(s.views.m)
}

// Close releases nothing and exists so that every strategy closes alike:
// Sampled has no background work.
func (s *Sampled) Close() {}
