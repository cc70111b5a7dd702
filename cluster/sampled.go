package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster/internal/shared"
	"github.com/floodgate-io/floodgate/internal/algo"
	"github.com/floodgate-io/floodgate/internal/memo"
)

// SampledConfig configures a Sampled limiter.
type SampledConfig struct {
	// Counter holds the global counts: a RedisCounter shared by the
	// fleet, or a clustertest.Counter in tests. Required.
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
// its cost; between its pushes a node decides on the others' counts its
// last push returned plus all it admitted itself. It serves fixed_window and
// sliding_window limits. It is safe for concurrent use.
type Sampled struct {
	counter Counter
	node    string // this node's name in the Counter: random, one per Sampled
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
// from every push's reply and read between replies as the node's clock +
// offset, so clock skew between nodes does not move them; before its first
// reply a node follows its own clock.
//
// # Error bounds
//
// Let R be the limit's Rate per Period, N the nodes, p = 1/OneIn, λ_j the
// rate of units arriving at node j, D a push's round trip, i the node that
// admitted last in a window, and unit costs. A node claims 1/p times the
// cost of each request it pushes; the store keeps each node's whole claim
// of a window, and their sum X is an unbiased estimate of the units A
// admitted in it:
//
//	E[X − A] = 0,   Var[X − A] = (1−p)/p · A   (Σ cost² for other costs)
//
// A node decides on known = the others' claims at its last reply + its own
// admissions, exactly; so no node admits more than R in a window. It has
// not seen what the others admitted since that reply: a node pushes after
// a geometric number G of its own admissions (mean 1/p, P(G > g) =
// (1−p)^g). With σ = √(R·(1−p)/p), for any z > 0 and g ≥ 1, with
// probability at least 1 − 1/(1+z²) − N·(1−p)^g (Cantelli's inequality, a
// union bound for the gaps), per window:
//
// Store answering, D below the Counter's timeout (a RedisCounter's Timeout,
// or the request's deadline if sooner: a request waits for its push):
//
//	overshoot  ≤ min(z·σ + Σ_{j≠i} λ_j·(g/λ_i + D), (N−1)·R)
//	           = min(z·σ + (N−1)·(g + λ·D), (N−1)·R)   (uniform λ)
//	undershoot ≤ z·σ  (in a window that denied a unit request)
//
// The first term is the sampling error, the second staleness: node i is
// blind for its last g admissions, which take it g/λ_i, while the others
// go on; a slower store widens it by λ·D. Small p makes few shared calls
// but long blind runs; with p = 1 the sampling error is 0 and only a round
// trip's arrivals are missed.
//
// Store slow beyond the timeout, or pushes failing now and then. A push
// that fails (no reply in time, a connection reset, an error) does not
// fail its (already decided) request and changes nothing: the key's next
// push carries the node's whole claim, whether or not the store applied
// the failed one, so nothing is counted twice or lost. The bound holds
// with g the node's admissions since its last successful push; a store
// that never answers in time leaves each node on its own count and the
// last others' claims: overshoot ≤ (N−1)·R, undershoot as above.
//
// Store unreachable. Once a key has had no successful reply for a whole
// Period of the limit (a new key counts from its first request), AllowN
// first pushes (or reads) synchronously and, if that fails too, returns an
// error wrapping floodgate.ErrStoreUnavailable, so that a failure policy
// (package failover; floodgate serve) decides. Until then overshoot ≤
// (N−1)·R per window.
//
// # Shared traffic
//
// p shared calls per admitted request, each one script call; plus one read
// for a key that has had no reply for a whole Period.
func NewSampled(cfg SampledConfig) (*Sampled, error) {
	switch {
	case cfg.Counter == nil:
		return nil, errors.New("cluster: SampledConfig.Counter is nil")
	case cfg.OneIn < 1 || cfg.OneIn > sampledMaxOneIn:
		return nil, fmt.Errorf("cluster: SampledConfig.OneIn must be between 1 and %d (p = 1/OneIn), got %d", sampledMaxOneIn, cfg.OneIn)
	}
	s := &Sampled{counter: cfg.Counter, node: counterNodeName(), oneIn: cfg.OneIn, clock: cfg.Clock, views: counterViews{m: map[counterViewKey]*counterView{}}}
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
		d, add, push, ok := s.decide(k, v, &p, cost)
		if !ok {
			continue // a sweep dropped the view just now
		}
		if push {
			_ = s.push(ctx, v, add) // a failed push's claim goes with the key's next, see NewSampled
		}
		return d, nil
	}
}

// decide makes the decision on the view and, for a sampled admitted
// request, raises this node's claim and prepares its push. ok is false
// when the view was dropped.
func (s *Sampled) decide(k counterViewKey, v *counterView, p *algo.Params, cost int64) (d floodgate.Decision, add CounterAdd, push, ok bool) {
	now := s.store.now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gone {
		return d, add, false, false
	}
	v.roll(shared.WindowOf(now, p.Period))
	v.used = v.window
	d = v.decide(p, now, cost)
	if d.Allowed && cost > 0 && s.sample() {
		v.cur.claim += s.oneIn * cost
		return d, v.add(k, s.node, true), true, true
	}
	return d, add, false, true
}

// params compiles a limit and checks that OneIn × Rate stays exact.
func (s *Sampled) params(l floodgate.Limit) (algo.Params, error) {
	p, err := counterParams("sampled", l)
	if err == nil && p.Rate > shared.MaxCount/s.oneIn {
		err = fmt.Errorf("cluster: sampled: %w: rate %d × OneIn %d exceeds %d, the largest exact count",
			floodgate.ErrInvalidLimit, p.Rate, s.oneIn, int64(shared.MaxCount))
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

// push sends this node's claims of a key and folds the reply into the
// view. A push that fails changes nothing: the key's next push carries
// the same claims or larger ones, whether or not the store applied this
// one.
func (s *Sampled) push(ctx context.Context, v *counterView, add CounterAdd) error {
	sent := s.clock.Now()
	reads, err := s.counter.Add(ctx, []CounterAdd{add})
	if err == nil && len(reads) != 1 {
		err = fmt.Errorf("counter replied %d reads for 1 add", len(reads))
	}
	if err != nil {
		return fmt.Errorf("cluster: sampled: push of key %q: %w", add.Key, err)
	}
	received := s.clock.Now()
	s.store.learn(reads[0].Now, sent, received)
	storeWindow := shared.WindowOf(s.store.now(), int64(add.Period/time.Microsecond))
	v.mu.Lock()
	defer v.mu.Unlock()
	v.settle(reads[0], storeWindow)
	v.lastOK = received
	return nil
}

// refresh pushes this node's claims (which reads the totals) when the key
// has had no reply for a whole period, and fails if the store still does
// not answer.
func (s *Sampled) refresh(ctx context.Context, k counterViewKey, v *counterView) error {
	now := s.clock.Now()
	v.mu.Lock()
	if now.Sub(v.lastOK) <= time.Duration(k.period)*time.Microsecond {
		v.mu.Unlock()
		return nil
	}
	v.roll(shared.WindowOf(s.store.now(), k.period))
	add := v.add(k, s.node, true)
	v.mu.Unlock()
	if err := s.push(ctx, v, add); err != nil {
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
// no decision used in the current or previous window: what they hold
// counts in no decision any more. Call with s.views.mu held.
func (s *Sampled) sweep() {
	if len(s.views.m) < 2*max(s.swept, 64) {
		return
	}
	now := s.store.now()
	for k, v := range s.views.m {
		v.mu.Lock()
		if v.used < shared.WindowOf(now, k.period)-1 {
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
