package decisionlog

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	_           [64]byte     // keeps the lines above read-only under a flood
	suppressed  [stripes]counters
}

// The suppressed records are counted in stripes, each on cache lines of
// its own, and a record picks one at random: under a flood every core
// counts, and one shared counter would bounce between them on every
// dropped record (measured: the parallel drop path took twice the serial
// one's time per record on 2 cores).
const stripes = 16

type counters struct {
	n [outcomes]atomic.Int64
	_ [128 - outcomes*8%128]byte
}

// suppress counts a dropped record of outcome index i.
func (b *budget) suppress(i int) {
	b.suppressed[rand.Uint32()%stripes].n[i].Add(1)
}

// init readies the budget at now (µs); clock is the Memory's, nil for its
// own monotonic clock, which reads as now's does.
func (b *budget) init(clock floodgate.Clock, now, rate, burst int64, interval time.Duration) error {
	b.limit = floodgate.PerSecond(rate).WithBurst(burst)
	if err := b.limit.Validate(); err != nil {
		return fmt.Errorf("%w: Rate %d/s with Burst %d: %w", ErrInvalidConfig, rate, burst, err)
	}
	var opts []floodgate.MemoryOption
	if clock != nil {
		opts = append(opts, floodgate.WithClock(clock))
	}
	b.mem = floodgate.NewMemory(opts...)
	b.interval = interval.Microseconds()
	b.summaryAt.Store(now + b.interval)
	return nil
}

// take reports whether a record may be written at us, and takes its
// token if so.
func (b *budget) take(us int64) bool {
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

// summary claims the summary due at us (any summary when force is set)
// and returns its counts; ok is false when none is due, another goroutine
// claimed it, or nothing was suppressed.
func (b *budget) summary(us int64, force bool) (c suppressedCounts, ok bool) {
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
	for s := range b.suppressed {
		for i := range c.n {
			n := b.suppressed[s].n[i].Swap(0)
			c.n[i] += n
			c.total += n
		}
	}
	c.interval = time.Duration(max(us-(at-b.interval), 0)) * time.Microsecond
	return c, c.total > 0
}
