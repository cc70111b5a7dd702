package experiments

import (
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// Algorithms are the algorithms the boundary and skew experiments compare,
// by their public names. The leaky bucket is left out: it delays rather than
// denies, so "admitted in a period" means something else for it.
var Algorithms = []string{"fixed_window", "sliding_window", "sliding_log", "token_bucket"}

// unitLimiter decides unit requests of one key with one algorithm, on
// whatever clock its caller passes in.
type unitLimiter struct {
	p     algo.Params
	state algo.State
	log   algo.Log
	r     algo.Result
}

// newUnitLimiter compiles rate per period for algorithm; the token bucket's
// burst is rate, the common setting, so every algorithm admits rate units at
// once from rest.
func newUnitLimiter(algorithm string, rate int64, period time.Duration) (*unitLimiter, error) {
	p, err := algo.Compile(algorithm, rate, period, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %d per %s: %w", ErrBadConfig, algorithm, rate, period, err)
	}
	return &unitLimiter{p: p}, nil
}

// allow decides one unit at now (µs) and commits it if admitted.
func (l *unitLimiter) allow(now int64) bool {
	if l.p.Kind == algo.SlidingLog {
		algo.DecideLog(&l.p, &l.log, now, 1, true, &l.r)
	} else {
		algo.Decide(&l.p, &l.state, now, 1, &l.r)
	}
	return l.r.Allowed
}
