package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"syscall"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster/internal/shared"
)

// leaseFlight is one renewal in flight. done is closed once its outcome
// is applied to the entry; err is then what a request waiting for it
// returns: a defect or the node closing, never the coordinator being
// unreachable (that is the strategy's documented degradation).
type leaseFlight struct {
	done chan struct{}
	err  error
}

// renewUnlock starts a renewal of e, which the caller holds locked, and
// unlocks e. The renewal runs on a goroutine of its own, so that it
// outlives the request that triggered it: a slow coordinator's answer is
// still applied when it arrives, however long after the request gave up
// waiting (up to OutageAfter). With WaitForRenewals it runs on the
// caller's goroutine instead, and is over on return. A leaving renewal
// forgets the key once it is over.
func (l *Leased) renewUnlock(ctx context.Context, e *leasedEntry, key string, limit floodgate.Limit, now time.Time, leaving bool) *leaseFlight {
	req, reported := l.beginRenewal(e, key, limit, now, leaving)
	f := &leaseFlight{done: make(chan struct{})}
	e.flight = f
	if !l.flights.enter() {
		f.err = ErrClosed
		l.endFlight(e, key, f, leaving)
		e.mu.Unlock()
		return f
	}
	e.mu.Unlock()
	run := func() {
		defer l.flights.leave()
		grant, sent, sentAt, err := l.call(ctx, req, now)
		e.mu.Lock()
		defer e.mu.Unlock()
		if leaving {
			f.err = err
		} else {
			f.err = l.finishRenewal(e, sent, reported, sentAt, grant, err)
		}
		l.endFlight(e, key, f, leaving)
	}
	if l.cfg.WaitForRenewals {
		run()
	} else {
		go run()
	}
	return f
}

// endFlight marks e's renewal over, with e locked.
func (l *Leased) endFlight(e *leasedEntry, key string, f *leaseFlight, leaving bool) {
	e.flight = nil
	if leaving {
		l.forgetLocked(key, e)
	}
	close(f.done)
}

// await waits for a renewal as a request may: until its answer, the
// Timeout, or the end of ctx, whichever comes first. It reports whether
// the outcome is in. The end of ctx's deadline counts as the Timeout (the
// request is denied, not failed, so that a failure policy around the
// strategy does not take a slow renewal for an outage); a cancelled ctx
// is the caller's error.
func (l *Leased) await(ctx context.Context, f *leaseFlight) (bool, error) {
	select {
	case <-f.done:
		return true, f.err
	default:
	}
	timer := time.NewTimer(l.cfg.Timeout)
	defer timer.Stop()
	select {
	case <-f.done:
		return true, f.err
	case <-timer.C:
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return false, ctx.Err()
		}
	}
	select { // an answer that raced the timeout is still an answer
	case <-f.done:
		return true, f.err
	default:
		return false, nil
	}
}

// call is one renewal's exchange with the coordinator, bounded by
// OutageAfter and by Close, not by the request that triggered it. A call
// that loses its answer (its connection timed out, reset or closed mid-
// call) is sent again, with a new Seq, until OutageAfter: a stalled store
// outlasts a client's connection deadline, and a renewal sent twice is
// harmless, since the coordinator applies only the newest. The first
// retry goes after a tenth of the Timeout, each next one after twice the
// pause before, up to the Interval. No answer within OutageAfter, or a
// refused connection, is the coordinator unreachable. It returns the last
// request sent and when it was sent (on this node's clock), from which the
// grant's times count.
func (l *Leased) call(ctx context.Context, req LeaseRequest, sentAt time.Time) (LeaseGrant, LeaseRequest, time.Time, error) {
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.OutageAfter)
	defer cancel()
	stop := context.AfterFunc(l.closing, cancel)
	defer stop()
	pause := max(l.cfg.Timeout/10, time.Microsecond)
	for {
		grant, err := l.cfg.Coordinator.Renew(callCtx, req)
		switch {
		case err == nil, l.closing.Err() != nil:
			return grant, req, sentAt, err
		case callCtx.Err() != nil:
			if !errors.Is(err, floodgate.ErrStoreUnavailable) {
				err = fmt.Errorf("cluster: leased: no answer within %s: %w: %w", l.cfg.OutageAfter, floodgate.ErrStoreUnavailable, err)
			}
			return grant, req, sentAt, err
		case !leaseAnswerLost(err):
			return grant, req, sentAt, err
		}
		timer := time.NewTimer(pause)
		select {
		case <-timer.C:
		case <-callCtx.Done():
			timer.Stop()
		}
		pause = min(2*pause, l.cfg.Interval)
		req.Seq, sentAt = l.seq.Add(1), l.clock.Now()
	}
}

// leaseAnswerLost reports whether a renewal failed for want of an answer
// on a connection that worked (a timeout, a reset, a close mid-call), as
// opposed to one refused: nothing listens there, and retrying until
// OutageAfter would only delay the verdict.
func leaseAnswerLost(err error) bool {
	var ne net.Error
	return (errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) &&
		!errors.Is(err, syscall.ECONNREFUSED)
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
		// Pin from the capacity, not the grant: while an earlier renewal
		// is unanswered its cap stands, since that renewal may have been
		// applied with a grant as small as the cap. Pinning from the grant
		// would lift the cap above what the coordinator may have left.
		pinned = min(max(0, e.capacity(now)-e.used), reserve)
	}
	e.capped, e.pinCap = true, e.used+pinned
	return LeaseRequest{
		Key:      key,
		Node:     l.cfg.Members.Self(),
		Rate:     limit.Rate,
		Period:   limit.Period,
		Lease:    l.leaseLength(),
		Window:   e.window,
		Used:     e.used,
		Pinned:   pinned,
		Nodes:    min(max(l.cfg.Members.Count(), 1), shared.MaxLeaseNodes),
		Demand:   demand,
		Leaving:  leaving,
		Seq:      l.seq.Add(1),
		Answered: e.answered,
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

// finishRenewal applies a renewal's outcome to e, locked. Without an
// answer the cap on e stays: the renewal may still be applied.
func (l *Leased) finishRenewal(e *leasedEntry, req LeaseRequest, reported int64, sentAt time.Time, grant LeaseGrant, err error) error {
	if err != nil {
		if !errors.Is(err, floodgate.ErrStoreUnavailable) {
			return err
		}
		e.unreachable = true
		e.retryAt = sentAt.Add(l.cfg.Interval)
		if l.down.CompareAndSwap(false, true) {
			l.log.Warn("leased: coordinator unreachable; leases run out, then "+l.unreachablePolicy(),
				"key", req.Key, "err", err)
		}
		return nil
	}
	if grant.Stale {
		// Only a node that shares this node's name, or a clock set back
		// across a restart, makes renewals that look older than applied ones.
		l.log.Error("leased: the coordinator has a later renewal from this node's name; is another node running under it?",
			"key", req.Key, "node", req.Node)
		return nil
	}
	e.capped = false
	e.unreachable = false
	e.answered = req.Seq
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
