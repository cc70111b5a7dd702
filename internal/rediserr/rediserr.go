// Package rediserr classifies the errors of calls to Redis the same way for
// every part of Floodgate that keeps state there (redisstore, and the
// cluster strategies' counters and coordinators), so that callers and the
// failure policies tell a dead store from a caller that gave up or a bug.
package rediserr

import (
	"context"
	"errors"
	"fmt"

	"github.com/floodgate-io/floodgate"
	"github.com/redis/rueidis"
)

// Classify wraps err, the error of a call to Redis made on ctx, in a
// message that starts with what (the call). The caller giving up (ctx done)
// is the caller's error, unless ctx ended with a cause that wraps
// floodgate.ErrStoreUnavailable (the store's own timeout), which is
// returned; Redis answering with an error is a defect, reported as is; no
// answer in time is the store being unavailable, and wraps
// floodgate.ErrStoreUnavailable.
func Classify(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); errors.Is(cause, floodgate.ErrStoreUnavailable) {
			return fmt.Errorf("%s: %w", what, cause)
		}
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	if _, ok := rueidis.IsRedisErr(err); ok {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, floodgate.ErrStoreUnavailable, err)
}
