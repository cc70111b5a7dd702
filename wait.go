package floodgate

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNeverPasses is wrapped by the error Wait returns for a request that no
// wait can admit: its cost is above what the limit can ever hold (Burst for
// buckets, Rate for windows), which the Limiter reports with a negative
// RetryAfter.
var ErrNeverPasses = errors.New("floodgate: cost can never pass")

// The pauses Wait takes after a denial whose RetryAfter is 0, which a store
// that does not say when to come back answers: waitBackoffMin, doubled after
// each such denial in a row up to waitBackoffMax, so that Wait neither spins
// on the store nor sleeps long past the moment it would pass.
const (
	waitBackoffMin = 10 * time.Millisecond
	waitBackoffMax = time.Second
)

// Wait blocks until cost units pass for key under limit on any Limiter, following
// RetryAfter; fails at once (wrapping context.DeadlineExceeded) when the wait would
// pass ctx's deadline, and with an error when the cost can never pass.
//
// Wait asks l, and after a denial sleeps for the Decision's RetryAfter and
// asks again, until the request is admitted; it returns that Decision. It
// returns when the request may proceed: a LeakyBucket admits with a Delay,
// and Wait holds for it before returning (the Decision still reports it).
// A denial with RetryAfter 0 (a store that does not say) is retried after
// 10ms, doubling up to 1s while such denials go on.
//
// It returns an error, and the last Decision, when:
//   - ctx is done before or during a wait (wrapping ctx.Err());
//   - the next wait would end after ctx's deadline: at once, without sleeping
//     (wrapping context.DeadlineExceeded, as golang.org/x/time/rate does);
//   - the cost can never pass (wrapping ErrNeverPasses);
//   - l returns an error (wrapped: bad input, ErrStoreUnavailable...).
//
// Units admitted with a Delay that Wait then does not hold for (the deadline
// is too near, or ctx is cancelled during it) are given back when l is an
// Adjuster; otherwise they stay consumed. Waiters are not queued: each asks
// again when its own RetryAfter ends, so under contention a waiter may be
// denied again and wait anew.
func Wait(ctx context.Context, l Limiter, key string, limit Limit, cost int64) (Decision, error) {
	return systemTime.wait(ctx, l, key, limit, cost)
}

// waitTime is how Wait reads time and sleeps: the system clock and its
// timers, or, in tests, a virtual clock that sleeps nobody.
type waitTime struct {
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

var systemTime = waitTime{now: time.Now, after: time.After}

func (wt waitTime) wait(ctx context.Context, l Limiter, key string, limit Limit, cost int64) (d Decision, err error) {
	if l == nil {
		return d, errors.New("floodgate: Wait needs a Limiter, got nil")
	}
	backoff := time.Duration(0)
	for {
		if err := ctx.Err(); err != nil {
			return d, fmt.Errorf("floodgate: wait for %q: %w", key, err)
		}
		if d, err = l.AllowN(ctx, key, limit, cost); err != nil {
			return d, fmt.Errorf("floodgate: wait for %q: %w", key, err)
		}
		if d.Allowed {
			return d, wt.hold(ctx, l, key, limit, cost, d.Delay)
		}
		pause, err := nextPause(d.RetryAfter, &backoff)
		if err != nil {
			return d, fmt.Errorf("floodgate: wait for %q: %w", key, err)
		}
		if err := wt.sleep(ctx, pause); err != nil {
			return d, fmt.Errorf("floodgate: wait for %q: %w", key, err)
		}
	}
}

// nextPause is how long to sleep after a denial that said retryAfter;
// *backoff is the pause after the last denial that said 0 (0 if the last
// one said more).
func nextPause(retryAfter time.Duration, backoff *time.Duration) (time.Duration, error) {
	switch {
	case retryAfter < 0:
		return 0, ErrNeverPasses
	case retryAfter > 0:
		*backoff = 0
		return retryAfter, nil
	}
	*backoff = min(max(waitBackoffMin, 2**backoff), waitBackoffMax)
	return *backoff, nil
}

// hold sleeps for an admitted request's delay; when it cannot, it gives the
// units back if l can.
func (wt waitTime) hold(ctx context.Context, l Limiter, key string, limit Limit, cost int64, delay time.Duration) error {
	if delay <= 0 {
		return nil
	}
	err := wt.sleep(ctx, delay)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("floodgate: wait for %q: holding for its delay: %w", key, err)
	if a, ok := l.(Adjuster); ok && cost > 0 {
		// ctx may be done: the refund must still reach the store.
		if aerr := a.Adjust(context.WithoutCancel(ctx), key, limit, -cost); aerr != nil {
			err = errors.Join(err, fmt.Errorf("floodgate: giving back %d units of %q: %w", cost, key, aerr))
		}
	}
	return err
}

// sleep waits for d, or fails at once when d would end after ctx's
// deadline, or when ctx is done first.
func (wt waitTime) sleep(ctx context.Context, d time.Duration) error {
	if deadline, ok := ctx.Deadline(); ok && wt.now().Add(d).After(deadline) {
		return fmt.Errorf("a wait of %s would exceed the context deadline: %w", d, context.DeadlineExceeded)
	}
	select {
	case <-wt.after(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
