package failover

import (
	"context"
	"fmt"

	"github.com/floodgate-io/floodgate"
)

// adjust is Adjust of a Limiter whose store is a floodgate.Adjuster: it
// forwards the adjustment to the store, within Timeout and through the
// circuit breaker, like a decision. When the store cannot take it (unavailable, or the
// breaker open):
//
//   - under FailLocal the adjustment goes to the local Memory, under the
//     node's share of the limit as the local decisions are, and Adjust
//     returns nil: the local count it corrects is the one deciding;
//   - under FailOpen and FailClosed it returns an error wrapping
//     floodgate.ErrStoreUnavailable: the adjustment was not applied
//     anywhere (FailOpen's local count only describes, it never denies).
//
// Bad input is reported as such, even while the store is unavailable.
func (l *core) adjust(ctx context.Context, key string, limit floodgate.Limit, delta int64) error {
	store := l.adjuster
	ph, cause, err := l.admit(ctx)
	if err != nil {
		return err
	}
	if cause == nil {
		_, cause, err = guard(l, ctx, ph, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, store.Adjust(ctx, key, limit, delta)
		})
		if err != nil || cause == nil {
			return err
		}
	}
	return l.degradeAdjust(ctx, key, limit, delta, cause)
}

// degradeAdjust is the policy's answer to an adjustment the store could not
// take for cause.
func (l *core) degradeAdjust(ctx context.Context, key string, limit floodgate.Limit, delta int64, cause error) error {
	if l.cfg.Mode == FailLocal {
		return l.local.Adjust(ctx, key, nodeShare(limit, l.nodes()), delta)
	}
	if err := floodgate.ValidateAdjustment(key, delta); err != nil {
		return err
	}
	if err := limit.Validate(); err != nil {
		return err
	}
	return fmt.Errorf("failover: adjusting %q by %d: %w", key, delta, cause)
}
