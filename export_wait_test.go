package floodgate

import (
	"context"
	"time"
)

// WaitOn is Wait reading the time from clock and sleeping with after, so
// that tests run it on virtual time.
func WaitOn(clock Clock, after func(time.Duration) <-chan time.Time) func(ctx context.Context, l Limiter, key string, limit Limit, cost int64) (Decision, error) {
	return waitTime{now: clock.Now, after: after}.wait
}
