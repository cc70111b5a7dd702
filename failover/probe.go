package failover

import (
	"context"
	"errors"
	"fmt"
)

// ErrNoPing is returned by Probe when neither Config.Ping nor the store
// can ping: the breaker then learns of the store's return only from
// decisions.
var ErrNoPing = errors.New("failover: the store cannot be pinged (no Config.Ping, and the store is not a Pinger)")

// Probe reports whether the store answers, for readiness checks. A closed
// breaker answers nil at once. An open breaker whose cool-down is over
// sends its half-open probe now, as a ping rather than a decision, and
// closes on an answer; one still cooling down answers its cause.
//
// Readiness cannot wait for decisions to probe: a node reported unready
// gets no traffic, so without Probe a breaker opened by an outage would
// stay open, and the node unready, after the store came back.
func (l *core) Probe(ctx context.Context) error {
	if l.breaker.State() == Closed {
		return nil
	}
	ping := l.ping()
	if ping == nil {
		return ErrNoPing
	}
	ph, cause, err := l.admit(ctx)
	if err != nil {
		return err
	}
	if cause != nil {
		return cause
	}
	if ph.State() == Closed { // closed between the check above and admit
		return nil
	}
	_, cause, err = guard(l, ctx, ph, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, ping(ctx)
	})
	if err == nil && cause == nil && l.breaker.State() != Closed {
		// another probe failed in between: still not answering for sure
		return fmt.Errorf("%w: the breaker is %s", ErrBreakerOpen, l.breaker.State())
	}
	return errors.Join(cause, err)
}

func (l *core) ping() func(context.Context) error {
	if l.cfg.Ping != nil {
		return l.cfg.Ping
	}
	if p, ok := l.store.(Pinger); ok {
		return p.Ping
	}
	return nil
}
