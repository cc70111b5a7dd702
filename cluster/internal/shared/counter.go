package shared

import (
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
)

// CounterAdd is cluster.CounterAdd: one node's counts of one key.
type CounterAdd struct {
	Key       string
	Period    time.Duration
	Node      string
	Window    int64
	Count     int64
	PrevCount int64
}

// CounterRead is cluster.CounterRead: the store's view of one key after an add.
type CounterRead struct {
	Now      int64
	Window   int64
	Current  int64
	Previous int64

	Own, OwnPrevious int64
}

// counterMaxNode bounds a node's name in a counter.
const counterMaxNode = 256

// MaxCount keeps every count below 2^53, where Lua numbers stop being exact
// integers.
const MaxCount = 1 << 50

// ValidateAdd checks add i of a batch before any of the batch is applied,
// so that a bad add fails the whole batch with an error naming it.
func ValidateAdd(i int, a CounterAdd) error {
	if err := floodgate.ValidateRequest(a.Key, 0); err != nil { // the key-size policy of every store
		return fmt.Errorf("cluster: counter add %d: %w", i, err)
	}
	switch {
	case a.Node == "" || len(a.Node) > counterMaxNode:
		return fmt.Errorf("cluster: counter add %d: %w: node name must be 1 to %d bytes, got %d", i, floodgate.ErrInvalidKey, counterMaxNode, len(a.Node))
	case a.Period <= 0 || a.Period%time.Microsecond != 0:
		return fmt.Errorf("cluster: counter add %d: %w: period %s is not a positive whole number of microseconds", i, floodgate.ErrInvalidLimit, a.Period)
	case a.Count < 0 || a.PrevCount < 0:
		return fmt.Errorf("cluster: counter add %d: %w: counts must not be negative, got %d and %d", i, floodgate.ErrInvalidCost, a.Count, a.PrevCount)
	case a.Count > MaxCount || a.PrevCount > MaxCount:
		return fmt.Errorf("cluster: counter add %d: %w: count above %d", i, floodgate.ErrInvalidCost, int64(MaxCount))
	}
	return nil
}

// WindowOf returns the number of the window of length period (µs, > 0)
// that holds now (µs), rounding towards negative infinity, as window
// numbers before the epoch need.
func WindowOf(now, period int64) int64 {
	q := now / period
	if now%period != 0 && now < 0 {
		q--
	}
	return q
}

// counterWindows are the counts of one key in the store, of one node or
// summed over the nodes: the same rules as lua/counter_add.lua, so both
// implementations agree exactly.
type counterWindows struct {
	window, current, previous int64
}

// roll moves the counts to window w, never back: a store clock that went
// backwards keeps counting in the newest window.
func (c *counterWindows) roll(w int64) { Roll(&c.window, &c.current, &c.previous, w) }

// at returns the count of window w, nil when c holds no such window.
func (c *counterWindows) at(w int64) *int64 { return At(c.window, &c.current, &c.previous, w) }

// Roll moves what is held of a current window and the one before it
// forward to window w (never back): the current becomes the previous, or
// both are over.
func Roll[T any](window *int64, cur, prev *T, w int64) {
	var zero T
	switch {
	case w <= *window:
		return
	case w == *window+1:
		*prev, *cur = *cur, zero
	default:
		*prev, *cur = zero, zero
	}
	*window = w
}

// At returns what is held of window w, nil when it is neither the current
// window nor the one before.
func At[T any](window int64, cur, prev *T, w int64) *T {
	switch w {
	case window:
		return cur
	case window - 1:
		return prev
	}
	return nil
}

// counterMerge raises a node's count of window w to n, if the node's counts
// (rolled to the sums' window) hold that window and n is larger, and adds
// the difference to the sums.
func counterMerge(sums, node *counterWindows, w, n int64) {
	held, sum := node.at(w), sums.at(w)
	if held != nil && sum != nil && n > *held {
		*sum += n - *held
		*held = n
	}
}
