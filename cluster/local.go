package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/memo"
)

// ErrInvalidLocalConfig is wrapped by the errors of NewLocal given a bad
// configuration.
var ErrInvalidLocalConfig = errors.New("cluster: invalid config")

// LocalConfig configures NewLocal.
type LocalConfig struct {
	// Members tells the live node count (and, through MemberRanker, this
	// node's rank). Required.
	Members Members
	// Clock is the time of the in-memory store. Nil: the system's monotonic
	// clock.
	Clock floodgate.Clock
	// MaxKeys bounds the keys held (floodgate.WithMaxKeys); 0: unbounded.
	MaxKeys int
}

// Local is the local strategy (static local quota): each node enforces its
// share of the limit in memory and talks to nobody.
type Local struct {
	members Members
	ranker  MemberRanker // nil when Members cannot rank
	mem     *floodgate.Memory
	valid   memo.Cache[floodgate.Limit, bool] // limits already validated
}

var _ floodgate.Limiter = (*Local)(nil)

// NewLocal returns the local strategy: a node of N live nodes enforces
// Rate/N and Burst/N of every limit in a floodgate.Memory, with no shared
// traffic at all. It serves every algorithm.
//
// Division. With a MemberRanker, the node of rank r gets ⌊R/N⌋, plus 1 when
// r < R mod N, so the shares of N nodes sum to exactly R (the same for the
// burst B). Without one it gets ⌊R/N⌋, and the fleet loses R mod N (< N)
// units per Period to rounding. A node whose share is 0 (R < N) denies every
// request with RetryAfter = Period, the time after which a smaller fleet
// may have raised its share.
//
// Overshoot: 0 while every node sees the same N. Window algorithms admit at
// most R per window over the fleet, buckets at most B + R·t/Period over
// any interval t, as one node with the whole limit would. While views of N
// differ (a join or a failure not yet seen everywhere) node i enforces
// ⌈R/nᵢ⌉ on its own view nᵢ, so the fleet admits at most Σᵢ⌈R/nᵢ⌉ per
// window: with every view in {N−1, N} the overshoot is at most
// N·⌈R/(N−1)⌉ − R ≈ R/(N−1) + N. A key keeps its state when N changes:
// the Memory reads it under the new share, a window keeping its count and a
// bucket its backlog in time (the same fraction of a burst that scales with
// the share). So in a window that spans a change each node admits at most
// the largest share it held during the window, and the fleet at most the
// sum of those.
//
// Undershoot: a node cannot lend its unused share. With aᵢ arrivals on
// node i in a window and share sᵢ the fleet denies Σᵢ max(0, aᵢ − sᵢ) units
// even when Σᵢ aᵢ ≤ R; it grows with the skew and is at most R − ⌊R/N⌋
// (all traffic on one node). For example, with R = 1000 and N = 10, a node
// receiving 150 while the nine others receive 20 each denies 50 while the
// fleet has used 280 of 1000.
//
// Time and skew. There is no sync interval T, and neither the arrival rate
// nor the network delay enters the overshoot: no node waits for or hears
// from another; only the membership's own detection delay decides how long
// views of N differ. Buckets and the sliding log measure intervals on
// each node's own clock, so an offset between clocks does not matter. Fixed
// and sliding windows align to multiples of Period on each node's clock, so
// a clock skew σ shifts that node's windows by σ: in a window of the
// reference clock the node can admit its share of two of its own windows,
// which at worst doubles its share there (the same 2·R a fixed window
// already allows across any boundary); nothing else moves.
func NewLocal(cfg LocalConfig) (*Local, error) {
	if cfg.Members == nil {
		return nil, fmt.Errorf("%w: local strategy needs Members", ErrInvalidLocalConfig)
	}
	if cfg.MaxKeys < 0 {
		return nil, fmt.Errorf("%w: local strategy MaxKeys must not be negative, got %d", ErrInvalidLocalConfig, cfg.MaxKeys)
	}
	opts := []floodgate.MemoryOption{floodgate.WithMaxKeys(cfg.MaxKeys)}
	if cfg.Clock != nil {
		opts = append(opts, floodgate.WithClock(cfg.Clock))
	}
	l := &Local{members: cfg.Members, mem: floodgate.NewMemory(opts...)}
	l.ranker, _ = cfg.Members.(MemberRanker)
	return l, nil
}

// AllowN implements floodgate.Limiter against this node's share of limit.
func (l *Local) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	if err := floodgate.ValidateRequest(key, cost); err != nil {
		return floodgate.Decision{}, err
	}
	if _, err := l.valid.Get(limit, localValidate); err != nil {
		return floodgate.Decision{}, err
	}
	share, ok := l.Share(limit)
	if !ok {
		return localNoShare(limit, cost), nil
	}
	return l.mem.AllowN(ctx, key, share, cost)
}

// Share returns the part of limit this node enforces now, and false when
// that part is empty (the limit is smaller than the fleet).
func (l *Local) Share(limit floodgate.Limit) (floodgate.Limit, bool) {
	n, rank := l.members.Count(), -1
	if l.ranker != nil {
		rank = l.ranker.Rank()
	}
	share := limit
	share.Rate = localShareOf(limit.Rate, n, rank)
	if limit.Burst > 0 {
		share.Burst = localShareOf(limit.Burst, n, rank)
	}
	if share.Rate == 0 || (limit.Burst > 0 && share.Burst == 0) {
		return share, false
	}
	return share, true
}

// localValidate checks the whole limit before it is divided: a share may be
// valid where the limit is not (a rate above the maximum), or empty where
// the limit is invalid (a rate of 0).
func localValidate(limit floodgate.Limit) (bool, error) { return true, limit.Validate() }

// Close drops every key held.
func (l *Local) Close() { l.mem.Close() }

// localShareOf splits total over n nodes: ⌊total/n⌋ each, and one more for
// the nodes ranked below total mod n. rank < 0 (unknown) gets the floor, so
// that a node that cannot rank itself never takes a unit another may take.
func localShareOf(total int64, n, rank int) int64 {
	if n < 1 {
		n = 1
	}
	share := total / int64(n)
	if rank >= 0 && int64(rank) < total%int64(n) {
		share++
	}
	return share
}

// localNoShare answers a node whose share of limit is empty.
func localNoShare(limit floodgate.Limit, cost int64) floodgate.Decision {
	if cost == 0 {
		return floodgate.Decision{Allowed: true}
	}
	return floodgate.Decision{RetryAfter: limit.Period}
}
