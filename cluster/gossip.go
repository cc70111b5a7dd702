package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/memo"
)

// ErrInvalidGossipConfig is wrapped by the errors of NewGossip given a bad
// configuration.
var ErrInvalidGossipConfig = errors.New("cluster: invalid gossip config")

// GossipDefaultMaxKeys is the key cap of a GossipConfig that sets none.
const GossipDefaultMaxKeys = 100_000

// GossipConfig configures NewGossip.
type GossipConfig struct {
	// Members names this node (Self), which owns one slot of every counter.
	// Required; names must be unique in the cluster.
	Members Members
	// Transport carries the counters to the other nodes: a *Membership, or
	// an in-memory transport in tests and simulations. Required.
	Transport GossipTransport
	// Clock is this node's time. Nil: the system clock.
	Clock floodgate.Clock
	// MaxKeys caps the keys (key and Period pairs) held; 0:
	// GossipDefaultMaxKeys.
	MaxKeys int
	// Interval is how often Start runs Tick. 0: one second.
	Interval time.Duration
	// Logger receives what could not be merged. Nil: slog.Default().
	Logger *slog.Logger
}

// Gossip is the gossip strategy: fixed windows counted by a G-counter CRDT
// per key and window, merged between nodes by gossip, with no shared store.
// It implements MembershipHook; NewGossip attaches it to its transport.
type Gossip struct {
	self      string
	transport GossipTransport
	clock     floodgate.Clock
	interval  time.Duration
	logger    *slog.Logger

	valid memo.Cache[floodgate.Limit, bool] // limits already checked

	mu      sync.Mutex
	replica *gossipReplica

	loop roundLoop
}

var (
	_ floodgate.Limiter = (*Gossip)(nil)
	_ MembershipHook    = (*Gossip)(nil)
)

// NewGossip returns the gossip strategy. It serves FixedWindow limits only.
//
// Counting. Each key and limit Period has, per window, a G-counter with one
// slot per node: a node adds what it admits to its own slot and broadcasts
// the slot's new value; a node merges what it hears by element-wise
// maximum, and push/pull exchanges of full state repair lost broadcasts. A
// request of cost c is admitted when (sum of the merged slots) + c ≤ R.
// Nothing is shared but the counters: no Redis, no leader; through a
// partition each side goes on counting, and on heal the counters merge
// (a slot never goes backwards).
//
// Windows are logical epochs: epoch = ⌊t/Period⌋ on each node's clock,
// aligned to multiples of Period since the Unix epoch, and a count is
// always tagged with its epoch, so nodes agree on which window a count
// belongs to whatever their skew. A node keeps counts for its current epoch
// and the next (for peers ahead of it) and drops ended windows in Tick: a
// clock skew σ < Period only shifts when a node moves on; counts from a
// peer more than one epoch ahead are dropped, so the bound needs σ < Period.
//
// Overshoot. Let D bound the gossip delay (the time until a node's count
// has reached every other node: memberlist sends the queued broadcasts
// every gossip interval T to 3 random members, so ⌈log₃(N−1)⌉·T plus the
// network delay, with its push/pull interval as the worst case under loss;
// floodgate serve sets T from --sync-interval) and λ
// the largest arrival rate of one node, in units per second. When a node
// admits, its view lacks at most what the other nodes admitted in the last
// D, and none of them admits more than R in a window, so per window the
// fleet admits at most
//
//	R + min((N−1)·λ·D, (N−1)·R)
//
// units; with uneven load (N−1)·λ may be replaced by the summed arrival
// rate of all nodes but the least busy one. With D = 0 it admits exactly
// min(arrivals, R). The skew σ < Period adds nothing per epoch; in real
// time a window of one node overlaps two epochs of another, so an interval
// of length Period holds at most 2·(R + overshoot), as a fixed window
// already allows across a boundary. A partition into k groups runs k
// separate counters: up to k·R per window until it heals.
//
// Undershoot: 0. The merged sum never exceeds what the fleet really
// admitted, so a node denies only when the fleet is at R.
//
// Network slow or lossy. Decisions never wait for the network and never
// fail for it, so a slow network only lengthens D. Messages that come late,
// out of order or twice change nothing else (a slot merges as a maximum,
// and a newer broadcast replaces an older one still queued); a count that
// arrives after its window has ended is dropped, not carried into the
// next. Broadcasts lost on the way, or dropped from memberlist's queue when
// it backs up, arrive with the next push/pull (memberlist's
// PushPullInterval, 30s in the LAN defaults that floodgate serve keeps):
// D is at most that. Whatever D, each node stops at R on its own count:
// the overshoot never exceeds (N−1)·R per window.
//
// There is no sync interval T in the bound: a count leaves with the
// decision that made it (memberlist sends queued broadcasts every gossip
// interval, which is part of D). Tick, every Interval, only collects ended
// windows.
//
// Memory is bounded by MaxKeys. At the cap a new key first makes ended
// windows go, and if none has ended, a local request for it fails with an
// error wrapping floodgate.ErrStoreUnavailable (so the failover policy
// decides: fail_local, say) and a peer's count for it is dropped.
func NewGossip(cfg GossipConfig) (*Gossip, error) {
	switch {
	case cfg.Members == nil:
		return nil, fmt.Errorf("%w: gossip strategy needs Members", ErrInvalidGossipConfig)
	case cfg.Members.Self() == "":
		return nil, fmt.Errorf("%w: gossip strategy needs a node name (Members.Self is empty)", ErrInvalidGossipConfig)
	case cfg.Transport == nil:
		return nil, fmt.Errorf("%w: gossip strategy needs a Transport", ErrInvalidGossipConfig)
	case cfg.MaxKeys < 0:
		return nil, fmt.Errorf("%w: gossip MaxKeys must not be negative, got %d", ErrInvalidGossipConfig, cfg.MaxKeys)
	case cfg.Interval < 0:
		return nil, fmt.Errorf("%w: gossip Interval must not be negative, got %s", ErrInvalidGossipConfig, cfg.Interval)
	}
	g := &Gossip{
		self:      cfg.Members.Self(),
		transport: cfg.Transport,
		clock:     cfg.Clock,
		interval:  cfg.Interval,
		logger:    cfg.Logger,
		replica:   newGossipReplica(gossipOr(cfg.MaxKeys, GossipDefaultMaxKeys)),
	}
	if g.interval == 0 {
		g.interval = time.Second
	}
	if g.logger == nil {
		g.logger = slog.Default()
	}
	cfg.Transport.Attach(g)
	return g, nil
}

// gossipOr returns v, or def when v is 0.
func gossipOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func (g *Gossip) now() int64 {
	if g.clock == nil {
		return time.Now().UnixMicro()
	}
	return g.clock.Now().UnixMicro()
}

// AllowN implements floodgate.Limiter.
func (g *Gossip) AllowN(_ context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	if err := floodgate.ValidateRequest(key, cost); err != nil {
		return floodgate.Decision{}, err
	}
	if _, err := g.valid.Get(limit, gossipServes); err != nil {
		return floodgate.Decision{}, err
	}
	now, period := g.now(), limit.Period.Microseconds()
	id, epoch := gossipWindowID{key: key, period: period}, gossipEpochOf(now, period)
	g.mu.Lock()
	c, err := g.replica.counter(id, epoch, now)
	if err != nil {
		g.mu.Unlock()
		return floodgate.Decision{}, fmt.Errorf("%w: %w", floodgate.ErrStoreUnavailable, err)
	}
	used := c.sum()
	d := floodgate.Decision{Limit: limit.Rate}
	var msg []byte
	switch {
	case cost > limit.Rate:
		d.RetryAfter = -time.Microsecond // never, as the other stores say it
	case used <= limit.Rate-cost:
		d.Allowed = true
		if cost > 0 {
			used += cost
			c[g.self] += cost
			msg = gossipEncodeSlot(gossipSlot{id: id, epoch: epoch, node: g.self, value: c[g.self]})
		}
	default:
		d.RetryAfter = gossipUntilEnd(now, epoch, period)
	}
	g.mu.Unlock()
	d.Remaining = max(0, limit.Rate-used)
	if used > 0 {
		d.ResetAfter = gossipUntilEnd(now, epoch, period)
	}
	if msg != nil {
		g.transport.Broadcast(gossipBroadcastName(id, epoch, g.self), msg)
	}
	return d, nil
}

// gossipServes refuses what a G-counter per window cannot enforce.
func gossipServes(limit floodgate.Limit) (bool, error) {
	if err := limit.Validate(); err != nil {
		return false, err
	}
	if limit.Algorithm != floodgate.FixedWindow {
		return false, fmt.Errorf("%w: the gossip strategy serves %s only, not %s",
			floodgate.ErrInvalidLimit, floodgate.FixedWindow, limit.Algorithm)
	}
	return true, nil
}

func gossipUntilEnd(now, epoch, period int64) time.Duration {
	return time.Duration((epoch+1)*period-now) * time.Microsecond
}

// gossipBroadcastName names a slot's broadcasts, so that a newer value
// replaces an older one still queued.
func gossipBroadcastName(id gossipWindowID, epoch int64, node string) string {
	return strconv.FormatInt(id.period, 36) + "/" + strconv.FormatInt(epoch, 36) + "/" + node + "/" + id.key
}

// NotifyMsg implements MembershipHook: a peer's slot.
func (g *Gossip) NotifyMsg(msg []byte) {
	s, err := gossipDecodeSlot(msg)
	if err != nil {
		g.logger.Debug("gossip: dropped a message", "node", g.self, "err", err)
		return
	}
	g.mu.Lock()
	_, err = g.replica.observe(s, g.now())
	g.mu.Unlock()
	if err != nil {
		g.logger.Debug("gossip: dropped a peer's count", "node", g.self, "key", s.id.key, "err", err)
	}
}

// LocalState implements MembershipHook: every window this node holds.
func (g *Gossip) LocalState() []byte {
	g.mu.Lock()
	windows := g.replica.snapshot()
	g.mu.Unlock()
	return gossipEncodeState(windows)
}

// MergeRemoteState implements MembershipHook: a peer's full state.
func (g *Gossip) MergeRemoteState(state []byte) {
	windows, err := gossipDecodeState(state)
	if err != nil {
		g.logger.Debug("gossip: dropped a state", "node", g.self, "err", err)
		return
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range windows {
		if err := g.replica.mergeWindow(w, now); err != nil {
			g.logger.Debug("gossip: dropped a peer's window", "node", g.self, "key", w.id.key, "err", err)
		}
	}
}

// Tick does one round of the periodic work: it drops the windows that have
// ended, and returns how many. Start calls it every Interval; tests call it
// on a ManualClock.
func (g *Gossip) Tick(context.Context) int {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.replica.collect(now)
}

// Counts returns a copy of the slots of key's current window under a
// limit of period: what this node knows each node admitted.
func (g *Gossip) Counts(key string, period time.Duration) map[string]int64 {
	now, p := g.now(), period.Microseconds()
	if p <= 0 {
		return map[string]int64{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.replica.keys[gossipWindowID{key: key, period: p}][gossipEpochOf(now, p)]
	return c.clone()
}

// Keys returns the number of keys held.
func (g *Gossip) Keys() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.replica.len()
}
