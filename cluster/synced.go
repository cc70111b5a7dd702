package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster/internal/shared"
	"github.com/floodgate-io/floodgate/internal/algo"
	"github.com/floodgate-io/floodgate/internal/memo"
)

// SyncedConfig configures a Synced limiter.
type SyncedConfig struct {
	// Counter holds the global counts: a RedisCounter shared by the
	// fleet, or a clustertest.Counter in tests. Required.
	Counter Counter
	// Interval is T, the time between two sync rounds of the background
	// loop (Start). Required, above 0.
	Interval time.Duration
	// Timeout bounds one round's call to the Counter (default the longer
	// of a second and 2·Interval). No decision waits for a round, so a
	// round outlasts a RedisCounter's own Timeout, which bounds the calls
	// that requests wait for: a store slower than that still answers a
	// round, and the node decides on totals as old as the round trip
	// instead of going on alone (see NewSynced).
	Timeout time.Duration
	// Clock is the node's clock (nil: the system clock).
	Clock floodgate.Clock
	// Logger reports the failed rounds of the background loop (nil:
	// slog.Default()).
	Logger *slog.Logger
}

// Synced is the synced strategy: each node counts its admissions locally
// and, every T, sends its counts to a shared Counter and pulls the global
// totals, deciding in between on the others' counts at the last reply plus
// all it admitted itself.
// It serves fixed_window and sliding_window limits. It is safe for
// concurrent use.
type Synced struct {
	counter Counter
	node    string // this node's name in the Counter: random, one per Synced
	every   time.Duration
	timeout time.Duration // bounds a round's call
	clock   floodgate.Clock
	store   counterStoreClock
	log     *slog.Logger
	limits  memo.Cache[floodgate.Limit, algo.Params]

	views counterViews

	round  sync.Mutex   // one round at a time
	lastOK atomic.Int64 // node clock, µs, at the end of the last successful round

	loop roundLoop
}

// NewSynced returns a synced limiter; call Sync every T, or Start to have
// a background loop do it.
//
// # Windows
//
// Windows are numbered on the Counter's clock (Redis TIME for a
// RedisCounter): window w spans [w·Period, (w+1)·Period). Each reply
// carries the store's time, which bounds the offset of the node's clock to
// the store's; the node narrows its estimate of the offset with each
// reply, so that a slow reply keeps what a fast one taught, and reads the
// store's time as its own clock + offset. So skew between node clocks
// does not move the windows: what remains is the offset's error, at most
// half the asymmetry of the fastest round trip plus the clocks' drift
// since, by which an admission near a boundary may be counted in the
// neighbouring window. Before its first reply a node follows its own
// clock; a first reply that shows it windows ahead moves its counts back
// to the store's window.
//
// # Error bounds
//
// Let R be the limit's Rate per Period, N the nodes, T the sync interval,
// D the round trip of a round (send to reply), λ_j the rate of units
// arriving at node j, and i the node that admitted last in a window. A node
// decides on known = the others' count at its last reply + all it admitted
// itself, and admits while known + cost ≤ R; its own admissions count in
// full, so no node admits more than R in a window. Undershoot is 0 for
// unit costs, whatever the store does: a node sends its whole count of a
// window, not an increment, and the store keeps the largest it was sent
// (see Counter), so a round that failed and was applied all the same is
// not counted twice; known never exceeds the true count, and a window that
// denied a request of cost c ends with more than R − c admitted. For
// sliding_window the same holds for the two-window estimate. Per window:
//
// Store answering, D up to SyncedConfig.Timeout (default max(1s, 2T)).
// The total a node read misses what each other node j admitted since its
// last round before the read, and the node decides on it until its next
// reply:
//
//	overshoot ≤ Σ_{j≠i} min(λ_j·(2T' + D), R) ≤ min((N−1)·λ·(2T' + D), (N−1)·R)
//
// with T' the time between two rounds: T while D ≤ T, and at most
// ⌈D/T⌉·T beyond (a round holds the node's sync for its round trip, and a
// tick that comes meanwhile is skipped). So the bound grows with the round
// trip, about (N−1)·λ·3D once D > T. A store slower than the store timeout
// that requests are held to is still this case: no decision waits for a
// round, and a round waits for its reply up to its own Timeout. λ_j is a
// peak rate; with random (Poisson) arrivals use a high quantile of the
// arrivals in 2T' + D.
//
// Store slow beyond Timeout, or rounds failing now and then. A round that
// fails (no reply within Timeout, a connection reset, an error) returns an
// error wrapping the Counter's (floodgate.ErrStoreUnavailable for a store
// that does not answer) and changes nothing: the next round sends the same
// counts, or larger ones. The bound holds with G_i, the longest a
// decision of node i comes after the store read the totals it decides on,
// and G_j, the longest time between two of node j's rounds that the store
// applied and answered (T' + D/2 and T' when every round succeeds):
//
//	overshoot ≤ Σ_{j≠i} min(λ_j·(G_i + G_j + D/2), R) ≤ (N−1)·R
//
// Store unreachable. AllowN decides on the last totals plus its own count
// for at most T + one Period of the limit after the last successful round
// (a round with nothing to send succeeds without a call), then fails with
// floodgate.ErrStoreUnavailable until a round succeeds, so that a failure
// policy (package failover; floodgate serve) decides. Until then each node
// admits at most R per window: overshoot ≤ (N−1)·R.
//
// # Shared traffic
//
// One Counter.Add per round, one pipelined round trip carrying a script
// call per key used in the current or previous window: per decision,
// (keys per round)/(arrivals per T), falling as 1/(rate·T).
func NewSynced(cfg SyncedConfig) (*Synced, error) {
	switch {
	case cfg.Counter == nil:
		return nil, errors.New("cluster: SyncedConfig.Counter is nil")
	case cfg.Interval <= 0:
		return nil, fmt.Errorf("cluster: SyncedConfig.Interval must be positive, got %s", cfg.Interval)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("cluster: SyncedConfig.Timeout must not be negative, got %s", cfg.Timeout)
	}
	s := &Synced{counter: cfg.Counter, node: counterNodeName(), every: cfg.Interval, timeout: cfg.Timeout,
		clock: cfg.Clock, log: cfg.Logger, views: counterViews{m: map[counterViewKey]*counterView{}}}
	if s.timeout == 0 {
		s.timeout = max(time.Second, 2*cfg.Interval)
	}
	if s.clock == nil {
		s.clock = counterSystemClock{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.store.clock = s.clock
	s.lastOK.Store(s.clock.Now().UnixMicro())
	return s, nil
}

// AllowN implements floodgate.Limiter: it decides on the last global total
// plus this node's admissions since, without calling the store.
func (s *Synced) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	if err := floodgate.ValidateRequest(key, cost); err != nil {
		return floodgate.Decision{}, err
	}
	p, err := s.limits.Get(limit, func(l floodgate.Limit) (algo.Params, error) { return counterParams("synced", l) })
	if err != nil {
		return floodgate.Decision{}, err
	}
	if err := s.fresh(p.Period); err != nil {
		return floodgate.Decision{}, err
	}
	for {
		v := s.view(key, p.Period)
		now := s.store.now()
		v.mu.Lock()
		if v.gone { // a round dropped it as idle just now
			v.mu.Unlock()
			continue
		}
		v.roll(shared.WindowOf(now, p.Period))
		v.used = v.window
		d := v.decide(&p, now, cost)
		v.mu.Unlock()
		return d, nil
	}
}

// fresh fails when the last successful round is more than T + a period
// ago: a round was due T after it, and the node has then decided alone for
// a whole window.
func (s *Synced) fresh(period int64) error {
	since := time.Duration(s.clock.Now().UnixMicro()-s.lastOK.Load()) * time.Microsecond
	limit := s.every + time.Duration(period)*time.Microsecond
	if since <= limit {
		return nil
	}
	return fmt.Errorf("cluster: synced: %w: no successful sync for %s, longer than the interval + the limit's period (%s)",
		floodgate.ErrStoreUnavailable, since, limit)
}

// view returns the view of a key, creating it.
func (s *Synced) view(key string, period int64) *counterView {
	return s.views.get(counterViewKey{key, period}, func() *counterView { return &counterView{} }, nil)
}

// Sync runs one round: it sends this node's counts of every key in use
// and pulls the global totals, in one call to the Counter. The background
// loop calls it every T; tests call it directly on a virtual clock. A
// round that fails changes nothing: the next one sends the same counts,
// or larger ones, whether or not the store applied this one's.
func (s *Synced) Sync(ctx context.Context) error {
	s.round.Lock()
	defer s.round.Unlock()
	keys, adds := s.prepare()
	sent := s.clock.Now()
	if len(adds) == 0 {
		s.lastOK.Store(sent.UnixMicro())
		return nil
	}
	rctx, cancel := context.WithTimeout(counterInRound(ctx), s.timeout)
	reads, err := s.counter.Add(rctx, adds)
	cancel()
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("%w: no reply within the round's timeout (%s): %w", floodgate.ErrStoreUnavailable, s.timeout, err)
	case err == nil && len(reads) != len(adds):
		err = fmt.Errorf("counter replied %d reads for %d adds", len(reads), len(adds))
	}
	if err != nil {
		return fmt.Errorf("cluster: synced: sync of %d keys: %w", len(adds), err)
	}
	received := s.clock.Now()
	s.store.learn(reads[0].Now, sent, received)
	now := s.store.now()
	for i, k := range keys {
		v := s.view(k.key, k.period)
		v.mu.Lock()
		v.settle(reads[i], shared.WindowOf(now, k.period))
		v.mu.Unlock()
	}
	s.lastOK.Store(received.UnixMicro())
	return nil
}

// prepare lists the counts to send; it forgets the views no decision used
// in the current or previous window, whose counts no longer matter.
func (s *Synced) prepare() ([]counterViewKey, []CounterAdd) {
	now := s.store.now()
	s.views.mu.Lock()
	defer s.views.mu.Unlock()
	keys := make([]counterViewKey, 0, len(s.views.m))
	adds := make([]CounterAdd, 0, len(s.views.m))
	for k, v := range s.views.m {
		v.mu.Lock()
		v.roll(shared.WindowOf(now, k.period))
		if v.used < v.window-1 {
			delete(s.views.m, k)
			v.gone = true
			v.mu.Unlock()
			continue
		}
		adds = append(adds, v.add(k, s.node, false))
		v.mu.Unlock()
		keys = append(keys, k)
	}
	return keys, adds
}
