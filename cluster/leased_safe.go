package cluster

import (
	"context"
	"time"

	"github.com/floodgate-io/floodgate"
)

// allowSafe decides against the safe capacity, in memory.
func (l *Leased) allowSafe(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	safe := l.safeRate(limit)
	if safe == 0 {
		return floodgate.Decision{Limit: limit.Rate, RetryAfter: l.cfg.Interval, ResetAfter: limit.Period}, nil
	}
	d, err := l.safe.AllowN(ctx, key, floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: safe, Period: limit.Period}, cost)
	if err != nil {
		return d, err
	}
	d.Limit = limit.Rate
	return d, nil
}

// safeRate is the units per window one node admits while cut off.
func (l *Leased) safeRate(limit floodgate.Limit) int64 {
	if l.cfg.SafeFraction > 0 {
		return int64(float64(limit.Rate) * l.cfg.SafeFraction)
	}
	return limit.Rate / int64(l.cfg.Members.Count())
}

// leasedCoordinatorClock is this node's estimate of the coordinator's clock,
// on which the safe capacity's windows are aligned.
type leasedCoordinatorClock struct{ l *Leased }

func (c leasedCoordinatorClock) Now() time.Time {
	return c.l.clock.Now().Add(time.Duration(c.l.offset.Load()))
}
