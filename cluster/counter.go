package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
)

// Counter is the shared state of the synced and sampled strategies: per key
// and window length, the global count of the store's current window and of
// the one before it. Windows are numbered on the store's clock (window w
// spans [w·Period, (w+1)·Period) µs since the Unix epoch), so every node
// agrees on them whatever its own clock says; each reply carries the store's
// time, from which a node learns the offset of its clock.
//
// Two implementations keep the same semantics: RedisCounter (one Lua script
// per key, pipelined) and MemoryCounter (plain Go, for tests and simulation).
type Counter interface {
	// Add applies every add, in order, and returns for each the store's
	// view right after it. A nil error means every add was applied.
	Add(ctx context.Context, adds []CounterAdd) ([]CounterRead, error)
}

// CounterAdd adds a node's counts to one key. Delta is counted in window
// Window and PrevDelta in Window−1, as the node numbered them. A delta for a
// window the store has left behind (older than its previous window) is
// dropped, as nothing decides on it any more; a delta for a window the store
// has not reached yet (the node's estimate of the store's clock ran ahead)
// counts in the store's current window. Both deltas 0 only reads.
type CounterAdd struct {
	Key       string
	Period    time.Duration // the window length: the limit's Period, whole microseconds
	Window    int64
	Delta     int64
	PrevDelta int64
}

// CounterRead is the store's view of one key after an add.
type CounterRead struct {
	Now      int64 // the store's clock, µs since the Unix epoch
	Window   int64 // the store's current window: ⌊Now/Period⌋ (or later if its clock went back)
	Current  int64 // global count of Window
	Previous int64 // global count of Window−1
}

// counterMaxKey bounds the keys a counter accepts, as redisstore does.
const counterMaxKey = 1024

// counterMaxDelta keeps every count below 2^53, where Lua numbers stop
// being exact integers.
const counterMaxDelta = 1 << 50

// counterValidate checks an add before any of the batch is applied, so that
// a bad add fails the whole batch with an error naming it.
func counterValidate(i int, a CounterAdd) error {
	switch {
	case a.Key == "":
		return fmt.Errorf("cluster: counter add %d: %w: key is empty", i, floodgate.ErrInvalidKey)
	case len(a.Key) > counterMaxKey:
		return fmt.Errorf("cluster: counter add %d: %w: key is %d bytes, longer than %d", i, floodgate.ErrInvalidKey, len(a.Key), counterMaxKey)
	case a.Period <= 0 || a.Period%time.Microsecond != 0:
		return fmt.Errorf("cluster: counter add %d: %w: period %s is not a positive whole number of microseconds", i, floodgate.ErrInvalidLimit, a.Period)
	case a.Delta < 0 || a.PrevDelta < 0:
		return fmt.Errorf("cluster: counter add %d: %w: deltas must not be negative, got %d and %d", i, floodgate.ErrInvalidCost, a.Delta, a.PrevDelta)
	case a.Delta > counterMaxDelta || a.PrevDelta > counterMaxDelta:
		return fmt.Errorf("cluster: counter add %d: %w: delta above %d", i, floodgate.ErrInvalidCost, int64(counterMaxDelta))
	}
	return nil
}

// counterValidateAll checks a whole batch.
func counterValidateAll(adds []CounterAdd) error {
	for i, a := range adds {
		if err := counterValidate(i, a); err != nil {
			return err
		}
	}
	return nil
}

// counterWindowOf returns the number of the window of length period (µs)
// that holds now (µs), rounding towards negative infinity.
func counterWindowOf(now, period int64) int64 {
	q := now / period
	if now%period != 0 && now < 0 {
		q--
	}
	return q
}

// counterWindows is one key's counts in the store: the same roll and add
// rules as lua/counter_add.lua, so both implementations agree exactly.
type counterWindows struct {
	window, current, previous int64
}

// advance moves the counts to the store's window for now, never back: a
// store clock that went backwards keeps counting in the newest window.
func (c *counterWindows) advance(now, period int64) {
	w := max(counterWindowOf(now, period), c.window)
	switch {
	case w == c.window:
	case w == c.window+1:
		c.previous, c.current = c.current, 0
	default:
		c.previous, c.current = 0, 0
	}
	c.window = w
}

// add counts delta that a node counted in window w.
func (c *counterWindows) add(w, delta int64) {
	switch {
	case delta == 0:
	case w >= c.window:
		c.current += delta
	case w == c.window-1:
		c.previous += delta
	}
}
