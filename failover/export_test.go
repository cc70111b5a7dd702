package failover

import (
	"context"

	"github.com/floodgate-io/floodgate"
)

// coreOf is the core under any Limiter New returns.
func coreOf(l Limiter) *core {
	switch l := l.(type) {
	case *core:
		return l
	case batching:
		return l.core
	case adjusting:
		return l.core
	case batchingAdjusting:
		return l.core
	}
	panic("failover: not a Limiter of New")
}

func (r result) degraded() bool      { return r.cause != nil }
func (r batchResult) degraded() bool { return r.cause != nil }

// Explain is AllowN that also says why the failure policy decided (cause,
// nil when the store did): for the external tests, which watch the policy
// from outside.
func Explain(ctx context.Context, l Limiter, key string, limit floodgate.Limit, cost int64) (d floodgate.Decision, cause, err error) {
	r, err := coreOf(l).decide(ctx, key, limit, cost)
	return r.Decision, r.cause, err
}
