package failover

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/breaker"
)

// admit decides whether a decision asks the store. It returns the caller's
// context error if the caller has given up, a cause (ErrBreakerOpen) when the
// open breaker skips the store, or else the breaker phase to call under.
// It is separate from guard so that a skipped decision builds no closure:
// during an outage every request takes this path, and it allocates nothing.
func (l *core) admit(ctx context.Context) (ph *breaker.Phase, cause, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	ph, ok := l.breaker.Admit()
	if !ok {
		return nil, ErrBreakerOpen, nil
	}
	if ph.State() == HalfOpen {
		l.logger().Debug("failover: probing the store", "mode", l.cfg.Mode)
	}
	return ph, nil, nil
}

// guard runs one store call admitted under phase ph, within the timeout. It
// returns the store's answer; or a cause (wrapping
// floodgate.ErrStoreUnavailable) when the policy must decide; or err, the
// caller's context error or an error that says nothing about the store's
// health (bad input), unchanged.
func guard[T any](l *core, ctx context.Context, ph *breaker.Phase, call func(context.Context) (T, error)) (v T, cause, err error) {
	v, err = callWithTimeout(l, ctx, call)
	cause, err = l.settle(ctx, ph, err)
	return v, cause, err
}

// settle records in the breaker how a store call admitted under phase ph
// ended (err: the call's error), and sorts err as guard returns it: nil
// and nil when the store answered; a cause when the policy must decide;
// else the caller's context error or bad input, unchanged.
func (l *core) settle(ctx context.Context, ph *breaker.Phase, err error) (cause, unchanged error) {
	if err == nil {
		l.succeeded(ph)
		return nil, nil
	}
	if gaveUp := callerErr(ctx); gaveUp != nil {
		l.breaker.Abandon(ph)
		return nil, gaveUp
	}
	if !isUnavailable(err) {
		l.breaker.Abandon(ph)
		return nil, err
	}
	cause = l.unavailable(err)
	l.stats.storeErrors.Add(1)
	l.failed(ph, cause)
	return cause, nil
}

// callerErr is the error of a caller that has given up: ctx's error, or
// context.DeadlineExceeded once ctx's deadline has passed, even if its
// timer has not fired yet. A store that waits on a timer of its own for
// the same deadline may return first, and its timeout is then the
// caller's, not the store's failure.
func callerErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// isUnavailable reports whether err means the store could not answer, as
// opposed to an answer about the request (bad input).
func isUnavailable(err error) bool {
	var ne net.Error
	return errors.Is(err, floodgate.ErrStoreUnavailable) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ne)
}

// unavailable makes err a cause that wraps floodgate.ErrStoreUnavailable, so
// that callers test one sentinel whatever the store's error was.
func (l *core) unavailable(err error) error {
	switch {
	case errors.Is(err, floodgate.ErrStoreUnavailable):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: no answer within %s: %w", floodgate.ErrStoreUnavailable, l.cfg.Timeout, err)
	default:
		return fmt.Errorf("%w: %w", floodgate.ErrStoreUnavailable, err)
	}
}

// outcome is what a store call sent back from its goroutine.
type outcome[T any] struct {
	v     T
	err   error
	panic *StorePanic
}

// StorePanic is the value a decision panics with when the store panicked
// while the decision waited for it: the store ran on another goroutine, so
// its panic is carried over to the caller's, where a server's recovery can
// see it.
type StorePanic struct {
	Value any
	Stack []byte // the store goroutine's stack at the panic
}

// String describes the panic with the store goroutine's stack, so that a
// recovery that prints the value shows where the store panicked.
func (p *StorePanic) String() string {
	return fmt.Sprintf("failover: store panicked: %v\n\n%s", p.Value, p.Stack)
}

// callWithTimeout returns the store's answer, or context.DeadlineExceeded
// once the timeout has passed, whether or not the store heeds its context.
// The store runs on its own goroutine so that one that ignores its context
// cannot hold the caller; the goroutine ends when the store returns, and the
// buffered channel lets it end even when nobody waits any more.
func callWithTimeout[T any](l *core, ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	if l.selfTimed { // the store keeps the bound itself (SelfTimed)
		return call(ctx)
	}
	tctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	if l.direct { // the store returns by the deadline itself: no goroutine needed
		v, err := call(tctx)
		if err != nil && tctx.Err() != nil && ctx.Err() == nil {
			return v, tctx.Err()
		}
		return v, err
	}
	done := make(chan outcome[T], 1)
	go run(l, tctx, call, done)
	select {
	case o := <-done:
		return o.unwrap()
	case <-tctx.Done():
	}
	select { // an answer that raced the deadline is still an answer
	case o := <-done:
		return o.unwrap()
	default:
		var zero T
		return zero, tctx.Err()
	}
}

func run[T any](l *core, ctx context.Context, call func(context.Context) (T, error), done chan<- outcome[T]) {
	var o outcome[T]
	returned := false
	defer func() {
		if !returned {
			o.panic = &StorePanic{Value: recover(), Stack: debug.Stack()}
			if ctx.Err() != nil { // the caller may have left: leave a trace
				l.logger().Error("failover: store panicked", "panic", o.panic.Value)
			}
		}
		done <- o
	}()
	o.v, o.err = call(ctx)
	returned = true
}

func (o outcome[T]) unwrap() (T, error) {
	if o.panic != nil {
		panic(o.panic)
	}
	return o.v, o.err
}
