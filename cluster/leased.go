package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/memo"
)

// Leased is the leased strategy: a floodgate.Limiter that admits requests
// in memory against a lease of quota taken from a budget shared through a
// Coordinator. It is safe for concurrent use. See NewLeased.
type Leased struct {
	cfg     LeasedConfig
	clock   floodgate.Clock
	log     *slog.Logger
	safe    *floodgate.Memory
	limits  memo.Cache[floodgate.Limit, bool]
	offset  atomic.Int64 // ns: coordinator time minus this node's, at the last grant
	down    atomic.Bool  // the last renewal found the coordinator unreachable
	entries sync.Map     // key → *leasedEntry; lock-free lookups on the fast path
	loop    roundLoop
	seq     atomic.Int64 // the last LeaseRequest.Seq sent

	// Renewals run on goroutines of their own; Close cancels and awaits them.
	closing context.Context
	close   context.CancelFunc
	flights flightGroup
}

// NewLeased returns the leased strategy: local allotments renewed by a
// periodic sync, done so that it never overshoots. It serves fixed_window limits only: a limit's
// budget is its Rate per window of its Period, and other algorithms are
// refused with an error wrapping floodgate.ErrInvalidLimit.
//
// How it works. Each node holds, per key, a lease: a number of units of the
// current window, valid until min(now+T·3/2, the window's end). A request is
// decided in memory against it, without calling the coordinator. Every T
// (Sync) the node renews each lease, reporting the units it used and its
// demand (units admitted and denied lately, as a rate per T); the
// coordinator answers with a new grant computed by water-filling the
// window's unused budget over the demands of the live nodes: idle nodes'
// shares shrink, busy nodes' grow. A node's grant never drops below what it
// has used, and units it does not get back are free for the others. A
// request that finds the lease exhausted renews it itself, at most once per
// EarlyRenewal per key, waiting at most Timeout; only one renewal per key is
// in flight, and requests arriving meanwhile are denied, never blocked.
//
// Slow is not down. A renewal runs on its own goroutine and outlives the
// request that triggered it: if no answer comes within Timeout, the
// request is denied (RetryAfter: the next renewal it may trigger) and the
// answer is applied when it arrives. Until an answer arrives the node
// admits only what the renewal pinned, and past the lease's end nothing:
// the renewal may have been applied, leaving a grant as small as that,
// whether its answer comes late or never. Renewals carry a sequence number,
// so one that reaches the coordinator after a later one of the same node
// (another connection, a stalled server) changes nothing. Only when a
// renewal fails with the store unavailable (a connection refused or
// reset), or stays unanswered for OutageAfter, is the coordinator
// unreachable.
//
// Windows. Window w is [w·Period, (w+1)·Period) on the coordinator's clock
// (Redis TIME): the coordinator numbers them, and a node only converts the
// durations the coordinator returns (lease validity, time to window end)
// into its own clock, starting from the moment it sent the request. Since a
// reply arrives after the coordinator read its clock, the node's view of a
// lease ends no later than the coordinator's, so the skew between node
// clocks, or between a node and Redis, does not matter. What does matter is
// a difference of clock rates: a node clock slower by a fraction ρ keeps a
// lease up to ρ·T too long.
//
// Bounds, with N nodes, T the Interval, R the Rate, P the Period, λᵢ node
// i's arrival rate (units per second), δ the network delay (one round trip
// to the coordinator) and B the EarlyRenewal:
//
//   - Overshoot is 0 by construction while the coordinator is reachable,
//     however slowly it answers (up to OutageAfter): the sum of the units
//     granted in a window is at most R (the coordinator never grants more
//     than the budget less the others' grants), and a node admits only
//     units granted to it for the window it is in. While a renewal is
//     unanswered the node admits at most the units it pinned in its
//     request, which any grant the renewal leaves still covers. With clock
//     rates differing by ρ the overshoot is at most Σᵢ λᵢ·ρ·T per window.
//   - Undershoot (units of min(R, offered) denied in a window w) is at
//     most Σᵢ λᵢ·(B + δ)·rᵢ, where rᵢ ≤ P/T + 1 + P/B is the number of
//     node i's renewals in w: a node denies only while a renewal is in
//     flight or within B after one (its lease exhausted, the next early
//     renewal not yet allowed). The denied units are also at most what was
//     leased but unused at the window's end, plus what was never leased:
//     grants follow demand, so under steady load both are small (rᵢ is
//     P/T + 1 and the denials come at window starts, before the demand of
//     the window is known); when a node goes idle its share moves to the
//     busy nodes within 2T (the idle node's next renewal gives it back, a
//     busy node's next one takes it).
//   - Coordinator unreachable (see above): a node keeps what its lease and
//     pin cover until the lease ends; then, with ReportUnavailable, a
//     failure policy decides (floodgate serve: the limit's failure_mode,
//     so fail_closed adds nothing to the leases and overshoot stays 0);
//     otherwise the node admits at most S = SafeFraction·R (default R/N) per window in memory,
//     on windows aligned to its estimate of the coordinator's clock (its own
//     plus the offset measured at its last grant, within one round trip).
//     The fleet then admits at most R + N·S per window: overshoot ≤ N·S,
//     plus at most S per node whose estimate has drifted across a window
//     boundary. The node retries once per T per key (and on every Sync) and
//     returns to leases as soon as the coordinator answers.
//   - Coordinator state lost (a Redis restart mid-window) forgets the
//     window's grants: at most R more can pass in that window.
//
// Shared traffic: one renewal per key per T per node, plus at most T/B
// early ones, so calls per decision fall as 1/(λ·T).
//
// Memory follows the active keys: Sync gives back and forgets a key idle
// for an Interval, and Close gives back every lease. A node that forgets a
// key (or restarts under the same name) and asks again in the same window
// is charged its whole earlier grant of the window as used, so forgetting
// never turns into overshoot.
func NewLeased(cfg LeasedConfig) (*Leased, error) {
	if err := leasedCheckConfig(cfg); err != nil {
		return nil, err
	}
	if cfg.EarlyRenewal == 0 {
		cfg.EarlyRenewal = cfg.Interval / 4
	}
	cfg.Timeout = leaseOr(cfg.Timeout, 50*time.Millisecond)
	cfg.OutageAfter = leaseOr(cfg.OutageAfter, DefaultOutageAfter(cfg.Interval, cfg.Timeout))
	l := &Leased{cfg: cfg, clock: cfg.Clock, log: cfg.Logger}
	l.closing, l.close = context.WithCancel(context.Background())
	// Renewals are ordered from a start above any this node's name used
	// before a restart: one per microsecond since the epoch is more than
	// any node makes.
	l.seq.Store(time.Now().UnixMicro())
	if l.clock == nil {
		l.clock = leasedSystemClock{}
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.safe = floodgate.NewMemory(floodgate.WithClock(leasedCoordinatorClock{l}), floodgate.WithMaxKeys(cfg.MaxKeys))
	return l, nil
}

// DefaultOutageAfter is LeasedConfig.OutageAfter's default for an Interval
// and a Timeout: the longest of a second, two intervals and the Timeout.
func DefaultOutageAfter(interval, timeout time.Duration) time.Duration {
	return max(time.Second, 2*interval, timeout)
}

// AllowN implements floodgate.Limiter. The fast path is a map lookup and a
// few integer operations under the key's lock.
func (l *Leased) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	if err := floodgate.ValidateRequest(key, cost); err != nil {
		return floodgate.Decision{}, err
	}
	if err := l.checkLimit(limit); err != nil {
		return floodgate.Decision{}, err
	}
	e := l.lockEntry(key, limit)
	now := l.clock.Now()
	if cost == 0 {
		d := e.peek(now, limit)
		e.mu.Unlock()
		return d, nil
	}
	if cost > limit.Rate {
		d := e.peek(now, limit)
		d.Allowed, d.RetryAfter = false, -time.Microsecond // never: above the whole window's budget
		e.mu.Unlock()
		return d, nil
	}
	e.requested += cost
	if d, ok := e.take(now, limit, cost); ok {
		e.mu.Unlock()
		return d, nil
	}
	if e.mayRenew(now) {
		f := l.renewUnlock(ctx, e, key, limit, now, false)
		answered, err := l.await(ctx, f)
		e.mu.Lock()
		if err != nil {
			e.mu.Unlock()
			return floodgate.Decision{}, err
		}
		now = l.clock.Now()
		if answered {
			if d, ok := e.take(now, limit, cost); ok {
				e.mu.Unlock()
				return d, nil
			}
		}
	}
	return l.fallbackUnlock(ctx, e, key, limit, now, cost)
}

// fallbackUnlock decides a request the lease cannot cover, and unlocks e:
// the safe capacity when the coordinator is unreachable and the lease has
// run out, a denial otherwise.
func (l *Leased) fallbackUnlock(ctx context.Context, e *leasedEntry, key string, limit floodgate.Limit, now time.Time, cost int64) (floodgate.Decision, error) {
	if !e.unreachable || e.valid(now) {
		d := e.deny(now, limit, l.cfg.EarlyRenewal)
		e.mu.Unlock()
		return d, nil
	}
	e.mu.Unlock()
	if l.cfg.ReportUnavailable {
		return floodgate.Decision{}, fmt.Errorf("cluster: leased %q: no lease and the coordinator is unreachable: %w",
			key, floodgate.ErrStoreUnavailable)
	}
	return l.allowSafe(ctx, key, limit, cost)
}

// unreachablePolicy says what applies past a lease while the coordinator
// is unreachable.
func (l *Leased) unreachablePolicy() string {
	if l.cfg.ReportUnavailable {
		return "the failure policy decides"
	}
	return "the safe capacity applies"
}

// checkLimit refuses the limits this strategy cannot serve.
func (l *Leased) checkLimit(limit floodgate.Limit) error {
	_, err := l.limits.Get(limit, func(lim floodgate.Limit) (bool, error) {
		err := LeasedServes(lim)
		return err == nil, err
	})
	return err
}

// lockEntry returns key's entry, locked, creating it on first use.
func (l *Leased) lockEntry(key string, limit floodgate.Limit) *leasedEntry {
	for {
		v, ok := l.entries.Load(key)
		if !ok {
			v, _ = l.entries.LoadOrStore(key, leasedNewEntry(limit))
		}
		e := v.(*leasedEntry)
		e.mu.Lock()
		if !e.gone { // Sync drops idle entries; take a fresh one then
			e.reset(limit)
			return e
		}
		e.mu.Unlock()
	}
}

// leasedSystemClock is the system clock; its readings carry the monotonic
// clock, so the durations measured with them ignore wall-clock steps.
type leasedSystemClock struct{}

func (leasedSystemClock) Now() time.Time { return time.Now() }
