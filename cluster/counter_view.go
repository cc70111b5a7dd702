package cluster

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/algo"
)

// This file holds what the synced and sampled strategies share: a node's
// view of one key's two windows on top of a Counter, the node's estimate of
// the store's clock, and the window decision itself.

// counterSlot is what a node knows of one window of one key.
type counterSlot struct {
	total   int64 // the window's global count in the store's last reply
	pending int64 // counted here and sent; the reply is not back yet
	local   int64 // counted here and not sent yet
	owed    int64 // sampled: sent amounts whose push failed, to send again
}

// known is the node's best count of the window: the last global total plus
// what it admitted since (the in-flight part included).
func (s *counterSlot) known() int64 { return s.total + s.pending + s.local }

// counterView is a node's view of one key (of one period): the store's
// window it believes current, and the one before it.
type counterView struct {
	mu     sync.Mutex
	window int64
	cur    counterSlot
	prev   counterSlot
	used   int64     // the last window a decision was made in
	gone   bool      // dropped from its strategy's map: look it up again
	lastOK time.Time // the node's clock at the last reply for this key (sampled)
}

// slot returns the slot of window w, nil when the view holds no such window.
func (v *counterView) slot(w int64) *counterSlot {
	switch w {
	case v.window:
		return &v.cur
	case v.window - 1:
		return &v.prev
	}
	return nil
}

// roll moves the view forward to window w (never back). What was counted
// in a window the view drops is forgotten: nothing decides on it any more.
func (v *counterView) roll(w int64) {
	switch {
	case w <= v.window:
		return
	case w == v.window+1:
		v.prev, v.cur = v.cur, counterSlot{}
	default:
		v.prev, v.cur = counterSlot{}, counterSlot{}
	}
	v.window = w
}

// counterFlight is one push of one key: in which window the node counted
// it, and for that window and the one before, how much of the node's local
// count moved to pending and how much was sent to the store.
type counterFlight struct {
	window int64
	moved  [2]int64 // [0]: window, [1]: window−1
	sent   [2]int64
}

// settle folds a successful reply into the view. The reply's totals
// replace what the view knew of the store's two windows (they include
// what was sent); what was sent for a window the reply does not report is
// kept as part of that window's total, since the store has it.
func (v *counterView) settle(f counterFlight, r CounterRead) {
	v.roll(r.Window)
	for i := range 2 {
		w := f.window - int64(i)
		s := v.slot(w)
		if s == nil {
			continue
		}
		s.pending -= f.moved[i]
		if w != r.Window && w != r.Window-1 {
			s.total += f.sent[i]
		}
	}
	// A window's global count only grows, so a reply that overtook a
	// later one never lowers it.
	if s := v.slot(r.Window); s != nil {
		s.total = max(s.total, r.Current)
	}
	if s := v.slot(r.Window - 1); s != nil {
		s.total = max(s.total, r.Previous)
	}
}

// unsettle undoes a push that failed: the moved counts are local again.
func (v *counterView) unsettle(f counterFlight) {
	for i := range 2 {
		if s := v.slot(f.window - int64(i)); s != nil {
			s.pending -= f.moved[i]
			s.local += f.moved[i]
		}
	}
}

// counterStoreClock is a node's estimate of the store's clock: its own
// clock plus the offset learnt from the last reply. Until the first reply
// the offset is 0: the node's windows follow its own clock.
type counterStoreClock struct {
	clock  floodgate.Clock
	offset atomic.Int64 // µs to add to the node's clock
}

// now returns the estimated store time in µs.
func (c *counterStoreClock) now() int64 { return c.clock.Now().UnixMicro() + c.offset.Load() }

// learn sets the offset from a reply that the store stamped storeNow,
// sent at node time sent and received at node time received: the store's
// stamp is taken as the midpoint, so the error is at most half the round
// trip's asymmetry.
func (c *counterStoreClock) learn(storeNow int64, sent, received time.Time) {
	mid := sent.UnixMicro() + received.Sub(sent).Microseconds()/2
	c.offset.Store(storeNow - mid)
}

// counterParams compiles a limit and refuses the algorithms a window
// counter cannot serve, naming the strategy and what it serves.
func counterParams(strategy string, limit floodgate.Limit) (algo.Params, error) {
	p, err := algo.Compile(string(limit.Algorithm), limit.Rate, limit.Period, limit.Burst)
	if err != nil {
		return p, fmt.Errorf("cluster: %s: %w", strategy, err)
	}
	if p.Kind != algo.FixedWindow && p.Kind != algo.SlidingWindow {
		return p, fmt.Errorf("cluster: %s: %w: it serves %s and %s (global window counts), not %s",
			strategy, floodgate.ErrInvalidLimit, floodgate.FixedWindow, floodgate.SlidingWindow, limit.Algorithm)
	}
	return p, nil
}

// decide applies a request to the view with the arithmetic of the
// in-memory window algorithms, taking the view's known counts as the
// window's state; if admitted, the cost is counted locally. The view must
// have been rolled to the window of now.
func (v *counterView) decide(p *algo.Params, now, cost int64) floodgate.Decision {
	st := algo.State{A: v.window * p.Period, B: v.cur.known()}
	if p.Kind == algo.SlidingWindow {
		st.C = v.prev.known()
	}
	var r algo.Result
	algo.Decide(p, &st, now, cost, &r)
	if r.Allowed {
		v.cur.local += cost
	}
	return floodgate.Decision{
		Allowed:    r.Allowed,
		Limit:      r.Limit,
		Remaining:  r.Remaining,
		RetryAfter: time.Duration(r.RetryAfter) * time.Microsecond,
		ResetAfter: time.Duration(r.ResetAfter) * time.Microsecond,
	}
}

// counterViewKey names a view: one per key and window length.
type counterViewKey struct {
	key    string
	period int64
}

// counterSystemClock is the system clock, the default of every strategy.
type counterSystemClock struct{}

func (counterSystemClock) Now() time.Time { return time.Now() }

// counterViews are a strategy's views of its keys.
type counterViews struct {
	mu sync.RWMutex // guards m
	m  map[counterViewKey]*counterView
}

// get returns the view of k. A missing one is made by fresh and stored,
// then added is called, both under the write lock.
func (vs *counterViews) get(k counterViewKey, fresh func() *counterView, added func()) *counterView {
	vs.mu.RLock()
	v, ok := vs.m[k]
	vs.mu.RUnlock()
	if ok {
		return v
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if v, ok = vs.m[k]; !ok {
		v = fresh()
		vs.m[k] = v
		if added != nil {
			added()
		}
	}
	return v
}
