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
	"github.com/floodgate-io/floodgate/internal/algo"
	"github.com/floodgate-io/floodgate/internal/memo"
)

// SyncedConfig configures a Synced limiter.
type SyncedConfig struct {
	// Counter holds the global counts: a RedisCounter shared by the
	// fleet, or a MemoryCounter in tests. Required.
	Counter Counter
	// Interval is T, the time between two sync rounds of the background
	// loop (Start). Required, above 0.
	Interval time.Duration
	// Clock is the node's clock (nil: the system clock).
	Clock floodgate.Clock
	// Logger reports the failed rounds of the background loop (nil:
	// slog.Default()).
	Logger *slog.Logger
}

// Synced is the synced strategy: each node counts its admissions locally
// and, every T, pushes them to a shared Counter and pulls the global
// totals, deciding in between on the last total plus its own count since.
// It serves fixed_window and sliding_window limits. It is safe for
// concurrent use.
type Synced struct {
	counter Counter
	every   time.Duration
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
// RedisCounter): window w spans [w·Period, (w+1)·Period). Each sync reply
// carries the store's time; the node keeps offset = that time − the
// midpoint of the round trip, and between replies reads the store's time as
// its own clock + offset. So skew between node clocks does not move the
// windows: what remains is the offset's error, at most half the round
// trip's asymmetry plus the node clock's drift over T, by which an
// admission near a boundary may be counted in the neighbouring window.
// Before its first reply a node follows its own clock.
//
// # Error bounds
//
// Let R be the limit's Rate per Period, N the nodes, T the sync interval,
// D the round trip of a sync (send to reply) and λ_j the rate of units
// arriving at node j. A node decides on known = the global total of its
// last reply + what it admitted since, and admits while known + cost ≤ R.
// The total it read misses, of every other node j, what j admitted after
// its last push that reached the store before the read (at most T + D
// earlier), and the node decides on that total until its next reply (at
// most T + D later). Hence, per window, with i the node that admitted
// last:
//
//	overshoot  = admitted − R ≤ Σ_{j≠i} min(λ_j·(2T + D), R)
//	                          ≤ min((N−1)·λ·(2T + D), (N−1)·R)  (every λ_j ≤ λ)
//
// Here T is the time between two rounds that actually run: a round holds
// the node's sync for its whole round trip and a background tick that
// comes while one is in flight is skipped, so with T < D the rounds are
// ⌈D/T⌉·T apart, and that is the T of the bound (package sim/bounds uses
// it so). λ_j is a peak rate; with random (Poisson) arrivals use a high
// quantile of the arrivals in 2T + D rather than the mean rate times it.
// The R in the min is each node's own cap: its own admissions are part of
// its known count. Undershoot is 0 for unit costs: known never exceeds the
// true global count (pushes are never lost, only possibly counted twice
// after a failed round, which errs towards denying), so a node denies only
// when the true count + cost > R; a window that denied a request of cost c
// ends with more than R − c admitted. For sliding_window the same holds for
// the two-window estimate previous·(Period − elapsed)/Period + current.
//
// # Shared traffic
//
// One Counter.Add per round, one pipelined round trip carrying a script
// call per key used in the current or previous window: per decision,
// (keys per round)/(arrivals per T), falling as 1/(rate·T).
//
// # Store unavailable
//
// A failed round returns an error wrapping the Counter's (for a store that
// does not answer, floodgate.ErrStoreUnavailable) and keeps the counts to
// push in the next round. AllowN keeps deciding on the last totals plus the
// local counts for at most T + one Period of the limit after the last
// successful round (the round that failed was due T after it; then the node
// has decided alone for one whole window), then fails with
// floodgate.ErrStoreUnavailable until a round succeeds, so that a failure
// policy (package failover) takes over. While it decides alone each node
// knows only its own admissions: up to (N−1)·R overshoot per window.
func NewSynced(cfg SyncedConfig) (*Synced, error) {
	switch {
	case cfg.Counter == nil:
		return nil, errors.New("cluster: SyncedConfig.Counter is nil")
	case cfg.Interval <= 0:
		return nil, fmt.Errorf("cluster: SyncedConfig.Interval must be positive, got %s", cfg.Interval)
	}
	s := &Synced{counter: cfg.Counter, every: cfg.Interval, clock: cfg.Clock, log: cfg.Logger,
		views: counterViews{m: map[counterViewKey]*counterView{}}}
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
		v.roll(counterWindowOf(now, p.Period))
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

// Sync runs one round: it pushes what this node admitted since the last
// round for every key in use and pulls the global totals, in one call to
// the Counter. The background loop calls it every T; tests call it
// directly on a virtual clock.
func (s *Synced) Sync(ctx context.Context) error {
	s.round.Lock()
	defer s.round.Unlock()
	keys, flights, adds := s.prepare()
	sent := s.clock.Now()
	if len(adds) == 0 {
		s.lastOK.Store(sent.UnixMicro())
		return nil
	}
	reads, err := s.counter.Add(ctx, adds)
	if err == nil && len(reads) != len(adds) {
		err = fmt.Errorf("counter replied %d reads for %d adds", len(reads), len(adds))
	}
	received := s.clock.Now()
	for i, k := range keys {
		v := s.view(k.key, k.period)
		v.mu.Lock()
		if err != nil {
			v.unsettle(flights[i])
		} else {
			v.settle(flights[i], reads[i])
		}
		v.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("cluster: synced: sync of %d keys: %w", len(adds), err)
	}
	s.store.learn(reads[0].Now, sent, received)
	s.lastOK.Store(received.UnixMicro())
	return nil
}

// prepare moves every view's local counts to pending and lists what to
// push; it forgets the views no decision used in the current or previous
// window, whose counts no longer matter.
func (s *Synced) prepare() ([]counterViewKey, []counterFlight, []CounterAdd) {
	now := s.store.now()
	s.views.mu.Lock()
	defer s.views.mu.Unlock()
	keys := make([]counterViewKey, 0, len(s.views.m))
	flights := make([]counterFlight, 0, len(s.views.m))
	adds := make([]CounterAdd, 0, len(s.views.m))
	for k, v := range s.views.m {
		v.mu.Lock()
		v.roll(counterWindowOf(now, k.period))
		if v.used < v.window-1 && v.cur.local == 0 && v.prev.local == 0 {
			delete(s.views.m, k)
			v.gone = true
			v.mu.Unlock()
			continue
		}
		f := counterFlight{window: v.window, moved: [2]int64{v.cur.local, v.prev.local}}
		f.sent = f.moved
		v.cur.pending += v.cur.local
		v.prev.pending += v.prev.local
		v.cur.local, v.prev.local = 0, 0
		v.mu.Unlock()
		keys = append(keys, k)
		flights = append(flights, f)
		adds = append(adds, CounterAdd{Key: k.key, Period: time.Duration(k.period) * time.Microsecond,
			Window: f.window, Delta: f.sent[0], PrevDelta: f.sent[1]})
	}
	return keys, flights, adds
}
