package cluster

import (
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster/internal/shared"
	"github.com/floodgate-io/floodgate/internal/algo"
)

// This file holds what the synced and sampled strategies share: a node's
// view of one key's two windows on top of a Counter, the node's estimate of
// the store's clock, and the window decision itself.

// counterSlot is what a node knows of one window of one key.
type counterSlot struct {
	others int64 // the other nodes' count: the last reply's sum less this node's own part of it
	mine   int64 // what this node admitted in the window
	claim  int64 // sampled: this node's count as the store should hold it (1/p × each sampled cost)
}

// known is the node's best count of the window: what the others had
// counted at the last reply plus all that this node admitted.
func (s *counterSlot) known() int64 { return s.others + s.mine }

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
func (v *counterView) slot(w int64) *counterSlot { return shared.At(v.window, &v.cur, &v.prev, w) }

// roll moves the view forward to window w (never back). What was counted
// in a window the view drops is forgotten: nothing decides on it any more.
func (v *counterView) roll(w int64) { shared.Roll(&v.window, &v.cur, &v.prev, w) }

// add returns the add that sends this node's counts of the view's two
// windows: what it admitted (synced), or its claims (sampled).
func (v *counterView) add(k counterViewKey, node string, claims bool) CounterAdd {
	a := CounterAdd{Key: k.key, Period: time.Duration(k.period) * time.Microsecond, Node: node,
		Window: v.window, Count: v.cur.mine, PrevCount: v.prev.mine}
	if claims {
		a.Count, a.PrevCount = v.cur.claim, v.prev.claim
	}
	return a
}

// settle folds a reply into the view: the others' counts of the store's
// two windows are the sums less this node's own part. A window's counts
// only grow, so a reply that overtook a later one never lowers them.
// storeWindow is the store's current window as the node now reckons it,
// with the offset this reply taught: a view ahead of it by more than a
// window was built on the node's own clock, before it knew the store's,
// and its counts move back to where the store counts them (see rebase).
func (v *counterView) settle(r CounterRead, storeWindow int64) {
	if v.window > storeWindow+1 {
		v.rebase(storeWindow)
	}
	v.roll(r.Window)
	if s := v.slot(r.Window); s != nil {
		s.others = max(s.others, r.Current-r.Own)
	}
	if s := v.slot(r.Window - 1); s != nil {
		s.others = max(s.others, r.Previous-r.OwnPrevious)
	}
}

// rebase moves a view that ran ahead of the store's clock back to window
// w: all this node counted moves into w, where the store counts it (more
// than happened in w, if anything: erring towards denying), and what it
// knew of the others, for windows the store has not reached, goes.
func (v *counterView) rebase(w int64) {
	v.cur = counterSlot{mine: min(v.cur.mine+v.prev.mine, shared.MaxCount), claim: min(v.cur.claim+v.prev.claim, shared.MaxCount)}
	v.prev = counterSlot{}
	v.window, v.used = w, min(v.used, w)
}

// counterStoreClock is a node's estimate of the store's clock: its own
// clock plus an offset learnt from the replies. Until the first reply the
// offset is 0: the node's windows follow its own clock.
type counterStoreClock struct {
	clock  floodgate.Clock
	offset atomic.Int64 // µs to add to the node's clock

	mu    sync.Mutex // one learn at a time
	known bool       // a reply has set offset
}

// now returns the estimated store time in µs.
func (c *counterStoreClock) now() int64 { return c.clock.Now().UnixMicro() + c.offset.Load() }

// learn narrows the offset with a reply that the store stamped storeNow,
// sent at node time sent and received at node time received. The store
// stamped it in between, so the true offset lies in [storeNow − received,
// storeNow − sent]: the first reply sets the offset to the middle of that
// range, and each later one moves it only as far as needed to lie in its
// range. So a slow reply, whose range is wide, keeps the offset of a fast
// one: the error stays within half the fastest round trip's asymmetry
// (plus the clocks' drift since), however slow the store has become.
func (c *counterStoreClock) learn(storeNow int64, sent, received time.Time) {
	lo, hi := storeNow-received.UnixMicro(), storeNow-sent.UnixMicro()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		c.offset.Store(lo + (hi-lo)/2)
		c.known = true
		return
	}
	c.offset.Store(min(max(c.offset.Load(), lo), hi))
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
		v.cur.mine += cost
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

// counterNodeName names a synced or sampled node in its Counter: 16
// random characters (80 bits), new with each limiter, so that two nodes,
// or a node restarted with its counts of the window still in the store,
// never share one.
func counterNodeName() string { return rand.Text()[:16] }

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
