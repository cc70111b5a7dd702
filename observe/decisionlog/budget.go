package decisionlog

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
)

// outcomes sizes the tables indexed by outcomeIndex: 0 for an outcome this
// package does not know, then observe's outcomes by value.
const (
	outcomes     = int(observe.Error) + 1
	allowedIndex = int(observe.Allowed)
)

func outcomeIndex(o observe.Outcome) int {
	if i := int(o); i > 0 && i < outcomes {
		return i
	}
	return 0
}

// budgetKey is the one key of the budget's store.
const budgetKey = "records"

// budget is the log's own rate limit: a token bucket of records, counted
// by a floodgate.Memory, and the records it suppressed since the last
// summary.
//
// Under a flood the bucket is empty and stays so; a record that finds it
// empty learns when it will hold a token again (the decision's honest
// RetryAfter) and stores that in closedUntil, so that the records until
// then are dropped on one atomic load, without the store's lock on the
// key: only the records that may be written take it.
type budget struct {
	mem         *floodgate.Memory
	limit       floodgate.Limit
	interval    int64        // µs between summaries, at least
	closedUntil atomic.Int64 // µs: no record passes before this
	summaryAt   atomic.Int64 // µs: the next summary is due then
	_           [64]byte     // the counters, written under a flood, on lines of their own
	suppressed  [outcomes]atomic.Int64
}

func (b *budget) init(clock floodgate.Clock, rate, burst int64, interval time.Duration) error {
	b.limit = floodgate.PerSecond(rate).WithBurst(burst)
	if err := b.limit.Validate(); err != nil {
		return fmt.Errorf("%w: Rate %d/s with Burst %d: %w", ErrInvalidConfig, rate, burst, err)
	}
	b.mem = floodgate.NewMemory(floodgate.WithClock(clock))
	b.interval = interval.Microseconds()
	b.summaryAt.Store(clock.Now().UnixMicro() + b.interval)
	return nil
}

// take reports whether a record may be written at now, and takes its
// token if so.
func (b *budget) take(now time.Time) bool {
	us := now.UnixMicro()
	if us < b.closedUntil.Load() {
		return false
	}
	d, err := b.mem.AllowN(context.Background(), budgetKey, b.limit, 1)
	if err != nil {
		return false // cannot happen: init validated the limit
	}
	if !d.Allowed {
		b.closedUntil.Store(us + d.RetryAfter.Microseconds())
	}
	return d.Allowed
}

// suppressedCounts is one summary: the records suppressed by result
// (outcomeIndex) over the interval since the previous summary.
type suppressedCounts struct {
	n        [outcomes]int64
	total    int64
	interval time.Duration
}

// summary claims the summary due at now (any summary when force is set)
// and returns its counts; ok is false when none is due, another goroutine
// claimed it, or nothing was suppressed.
func (b *budget) summary(now time.Time, force bool) (c suppressedCounts, ok bool) {
	us := now.UnixMicro()
	at := b.summaryAt.Load()
	if !force && us < at {
		return c, false
	}
	for !b.summaryAt.CompareAndSwap(at, us+b.interval) {
		if !force {
			return c, false
		}
		at = b.summaryAt.Load()
	}
	for i := range b.suppressed {
		c.n[i] = b.suppressed[i].Swap(0)
		c.total += c.n[i]
	}
	c.interval = time.Duration(max(us-(at-b.interval), 0)) * time.Microsecond
	return c, c.total > 0
}
