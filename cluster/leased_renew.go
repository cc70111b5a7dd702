package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/floodgate-io/floodgate"
)

// renewLocked renews e's lease for the request holding e's lock. It
// releases the lock during the call, so that other requests on the key go
// on (against the pinned units) instead of waiting, and holds it again on
// return. Only an error other than the coordinator being unreachable is
// returned: that one is the strategy's documented degradation.
func (l *Leased) renewLocked(ctx context.Context, e *leasedEntry, key string, limit floodgate.Limit) error {
	sentAt := l.clock.Now()
	req, reported := l.beginRenewal(e, key, limit, sentAt, false)
	e.mu.Unlock()
	grant, err := l.call(ctx, req)
	e.mu.Lock()
	return l.finishRenewal(e, req, reported, sentAt, grant, err)
}

// call is one coordinator call, bounded by the Timeout. A call cut by the
// Timeout, not by the caller, counts as the coordinator unreachable.
func (l *Leased) call(ctx context.Context, req LeaseRequest) (LeaseGrant, error) {
	callCtx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	grant, err := l.cfg.Coordinator.Renew(callCtx, req)
	if err != nil && ctx.Err() == nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) && !errors.Is(err, floodgate.ErrStoreUnavailable) {
		err = fmt.Errorf("cluster: leased: no answer within %s: %w: %w", l.cfg.Timeout, floodgate.ErrStoreUnavailable, err)
	}
	return grant, err
}

// beginRenewal marks a renewal of e in flight and builds its request. It
// pins the units this node may still admit from its lease until the reply:
// no more than the demand expected during one Timeout, so that an idle
// node gives back nearly all it holds. It returns the request and how many
// requested units its demand reports.
func (l *Leased) beginRenewal(e *leasedEntry, key string, limit floodgate.Limit, now time.Time, leaving bool) (LeaseRequest, int64) {
	demand := l.demand(e, now, limit)
	var pinned int64
	if e.valid(now) && !leaving {
		reserve := int64(math.Ceil(float64(demand) * float64(l.cfg.Timeout) / float64(l.cfg.Interval)))
		pinned = min(max(0, e.granted-e.used), reserve)
	}
	e.renewing, e.pinCap = true, e.used+pinned
	return LeaseRequest{
		Key:     key,
		Node:    l.cfg.Members.Self(),
		Rate:    limit.Rate,
		Period:  limit.Period,
		Lease:   l.leaseLength(),
		Window:  e.window,
		Used:    e.used,
		Pinned:  pinned,
		Nodes:   min(max(l.cfg.Members.Count(), 1), leaseMaxNodes),
		Demand:  demand,
		Leaving: leaving,
	}, e.requested
}

// leaseLength is the validity a node asks for: half an interval more than
// the interval, so that the renewal every T lands before the lease ends.
func (l *Leased) leaseLength() time.Duration { return l.cfg.Interval + l.cfg.Interval/2 }

// demand is the units requested since the last report, as a rate per
// Interval, counted over at least EarlyRenewal so that a burst right after
// a renewal does not look like an endless flood; capped at the Rate, beyond
// which more demand changes nothing.
func (l *Leased) demand(e *leasedEntry, now time.Time, limit floodgate.Limit) int64 {
	if e.requested == 0 {
		return 0
	}
	span := l.cfg.EarlyRenewal
	if !e.reportedAt.IsZero() {
		span = max(span, now.Sub(e.reportedAt))
	}
	perInterval := math.Ceil(float64(e.requested) * float64(l.cfg.Interval) / float64(span))
	return int64(min(perInterval, float64(limit.Rate)))
}

// finishRenewal applies a renewal's outcome to e, locked.
func (l *Leased) finishRenewal(e *leasedEntry, req LeaseRequest, reported int64, sentAt time.Time, grant LeaseGrant, err error) error {
	e.renewing = false
	if err != nil {
		if !errors.Is(err, floodgate.ErrStoreUnavailable) {
			return err
		}
		e.unreachable = true
		e.retryAt = sentAt.Add(l.cfg.Interval)
		if l.down.CompareAndSwap(false, true) {
			l.log.Warn("leased: coordinator unreachable; leases run out, then the safe capacity applies",
				"key", req.Key, "err", err)
		}
		return nil
	}
	e.unreachable = false
	if l.down.CompareAndSwap(true, false) {
		l.log.Info("leased: coordinator reachable again", "key", req.Key)
	}
	if e.limit.Rate != req.Rate || e.limit.Period != req.Period {
		return nil // the key's limit changed in flight; the grant is of the old budget
	}
	if grant.Window != req.Window {
		// What the old lease admitted belonged to the old window; of this
		// one, the coordinator says what counts as used.
		e.used = grant.Used
	}
	e.window, e.granted, e.unleased = grant.Window, grant.Granted, grant.Unleased
	e.expires = sentAt.Add(grant.Valid)
	e.windowEnd = sentAt.Add(grant.WindowLeft)
	e.nextRenew = sentAt.Add(l.cfg.EarlyRenewal)
	e.requested = max(0, e.requested-reported)
	e.reportedAt = sentAt
	l.offset.Store(int64(l.coordinatorNow(grant, req.Period).Sub(sentAt)))
	return nil
}

// coordinatorNow is the coordinator's time when it made grant.
func (l *Leased) coordinatorNow(grant LeaseGrant, period time.Duration) time.Time {
	end := (grant.Window + 1) * int64(period/time.Microsecond)
	return time.UnixMicro(end - int64(grant.WindowLeft/time.Microsecond))
}
