package cluster

import (
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
)

// leasedEntry is one key's lease on this node. Times are on this node's
// clock. Every field is guarded by mu.
type leasedEntry struct {
	mu    sync.Mutex
	limit floodgate.Limit
	gone  bool // dropped by Sync; callers holding it look the key up again

	// The lease: units of the coordinator's window `window` (-1: none).
	window    int64
	granted   int64 // units this node may admit in window, used ones included
	used      int64
	expires   time.Time // the lease's end
	windowEnd time.Time
	unleased  int64 // what the last grant left of the window's budget

	// The renewal in flight, if any: one per key at a time, so that a
	// node's renewals of a key reach the coordinator in order.
	flight *leaseFlight
	// capped holds used to pinCap from the start of a renewal until an
	// answer arrives. A renewal given up on may still be applied late, and
	// leave a grant as small as pinCap, so the cap outlives it until a
	// later renewal is answered.
	capped bool
	pinCap int64

	answered    int64     // the Seq of the last renewal whose answer was applied
	nextRenew   time.Time // earliest renewal a request may trigger
	retryAt     time.Time // after an unreachable coordinator, earliest retry by a request
	unreachable bool      // the last renewal found the coordinator unreachable

	// Demand: units requested (admitted or denied) since reportedAt.
	requested  int64
	reportedAt time.Time
}

func leasedNewEntry(limit floodgate.Limit) *leasedEntry {
	return &leasedEntry{limit: limit, window: -1}
}

// reset forgets the lease when the key's limit changed: the old grant was
// of another budget.
func (e *leasedEntry) reset(limit floodgate.Limit) {
	if e.limit == limit {
		return
	}
	flight := e.flight
	*e = leasedEntry{limit: limit, window: -1, requested: e.requested, reportedAt: e.reportedAt}
	// A renewal in flight still finishes on this entry; keep it exclusive.
	e.flight = flight
}

// valid reports whether the lease covers now.
func (e *leasedEntry) valid(now time.Time) bool {
	return e.window >= 0 && now.Before(e.expires)
}

// capacity is how many units the lease lets pass in total right now.
func (e *leasedEntry) capacity(now time.Time) int64 {
	if !e.valid(now) {
		return e.used
	}
	if e.capped {
		return min(e.granted, e.pinCap)
	}
	return e.granted
}

// take admits cost units from the lease if it can cover them.
func (e *leasedEntry) take(now time.Time, limit floodgate.Limit, cost int64) (floodgate.Decision, bool) {
	capacity := e.capacity(now)
	if e.used+cost > capacity {
		return floodgate.Decision{}, false
	}
	e.used += cost
	return floodgate.Decision{
		Allowed:    true,
		Limit:      limit.Rate,
		Remaining:  capacity - e.used,
		ResetAfter: e.resetAfter(now, limit),
	}, true
}

// peek reports the lease without consuming it.
func (e *leasedEntry) peek(now time.Time, limit floodgate.Limit) floodgate.Decision {
	return floodgate.Decision{
		Allowed:    true,
		Limit:      limit.Rate,
		Remaining:  max(0, e.capacity(now)-e.used),
		ResetAfter: e.resetAfter(now, limit),
	}
}

// deny answers a request the lease cannot cover: retry at the next renewal
// this key may trigger, or at the window's end when the last grant left no
// budget unleased.
func (e *leasedEntry) deny(now time.Time, limit floodgate.Limit, early time.Duration) floodgate.Decision {
	d := floodgate.Decision{Limit: limit.Rate, Remaining: max(0, e.capacity(now)-e.used), ResetAfter: e.resetAfter(now, limit)}
	switch {
	case e.window >= 0 && e.unleased == 0 && now.Before(e.windowEnd):
		d.RetryAfter = e.windowEnd.Sub(now)
	case now.Before(e.nextRenew):
		d.RetryAfter = e.nextRenew.Sub(now)
	default:
		d.RetryAfter = early
	}
	return d
}

// resetAfter is the time to the end of the lease's window, or a Period when
// no lease tells where the window ends.
func (e *leasedEntry) resetAfter(now time.Time, limit floodgate.Limit) time.Duration {
	if e.window >= 0 && now.Before(e.windowEnd) {
		return e.windowEnd.Sub(now)
	}
	return limit.Period
}

// mayRenew reports whether a request that the lease cannot cover may renew
// it now: one renewal in flight per key, none before retryAt after a
// failure, and an exhausted lease that is still valid no more often than
// once per EarlyRenewal.
func (e *leasedEntry) mayRenew(now time.Time) bool {
	if e.flight != nil || now.Before(e.retryAt) {
		return false
	}
	return !e.valid(now) || !now.Before(e.nextRenew)
}
