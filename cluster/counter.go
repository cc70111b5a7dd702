package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
)

// Counter is the shared state of the synced and sampled strategies: per key
// and window length, each node's count of the store's current window and of
// the one before it, and their sums. Windows are numbered on the store's
// clock (window w spans [w·Period, (w+1)·Period) µs since the Unix epoch),
// so every node agrees on them whatever its own clock says; each reply
// carries the store's time, from which a node learns the offset of its
// clock.
//
// A node sends its whole count of a window, never an increment, and the
// store keeps per node the largest count it was sent: an add may be sent
// again, arrive twice or late, or be applied by a store whose reply was
// lost (a timeout, a connection reset), and the sums still count every
// unit once. So a node whose call failed sends the same counts again, or
// larger ones, with its next call, without knowing whether the failed one
// was applied.
//
// Two implementations keep the same semantics: RedisCounter (one Lua script
// per key, pipelined) and MemoryCounter (plain Go, for tests and simulation).
type Counter interface {
	// Add applies every add, in order, and returns for each the store's
	// view right after it. A nil error means every add was applied; after
	// an error any of them may have been applied or not.
	Add(ctx context.Context, adds []CounterAdd) ([]CounterRead, error)
}

// CounterAdd is one node's counts of one key. Count is the node's whole
// count of window Window and PrevCount of Window−1, as the node numbered
// them; the store keeps, for each of the two, the larger of what it holds
// for the node and what it is sent. A count for a window the store has
// left behind (older than its previous window) is dropped, as nothing
// decides on it any more; a count for a window the store has not reached
// yet (the node's estimate of the store's clock ran ahead) is not kept
// either, and the node sends it again once the store is there. Counts no
// larger than the store holds only read.
type CounterAdd struct {
	Key       string
	Period    time.Duration // the window length: the limit's Period, whole microseconds
	Node      string        // the sending node; its counts are kept apart from every other's
	Window    int64
	Count     int64
	PrevCount int64
}

// CounterRead is the store's view of one key after an add.
type CounterRead struct {
	Now      int64 // the store's clock, µs since the Unix epoch
	Window   int64 // the store's current window: ⌊Now/Period⌋ (or later if its clock went back)
	Current  int64 // global count of Window: the sum over the nodes
	Previous int64 // global count of Window−1
	// Own and OwnPrevious are the sending node's counts of Window and
	// Window−1 as the store holds them, part of Current and Previous.
	Own, OwnPrevious int64
}

// counterRoundKey marks the context of a synced round's call.
type counterRoundKey struct{}

// counterInRound marks ctx as a synced round's: no request waits for it,
// so its own deadline bounds the call, not a RedisCounter's Timeout.
func counterInRound(ctx context.Context) context.Context {
	return context.WithValue(ctx, counterRoundKey{}, true)
}

// counterRound reports whether ctx is a synced round's.
func counterRound(ctx context.Context) bool {
	round, _ := ctx.Value(counterRoundKey{}).(bool)
	return round
}

// counterMaxNode bounds a node's name in a counter.
const counterMaxNode = 256

// counterMaxCount keeps every count below 2^53, where Lua numbers stop
// being exact integers.
const counterMaxCount = 1 << 50

// counterValidate checks an add before any of the batch is applied, so that
// a bad add fails the whole batch with an error naming it.
func counterValidate(i int, a CounterAdd) error {
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
	case a.Count > counterMaxCount || a.PrevCount > counterMaxCount:
		return fmt.Errorf("cluster: counter add %d: %w: count above %d", i, floodgate.ErrInvalidCost, int64(counterMaxCount))
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

// counterWindows are the counts of one key in the store, of one node or
// summed over the nodes: the same rules as lua/counter_add.lua, so both
// implementations agree exactly.
type counterWindows struct {
	window, current, previous int64
}

// roll moves the counts to window w, never back: a store clock that went
// backwards keeps counting in the newest window.
func (c *counterWindows) roll(w int64) { counterRoll(&c.window, &c.current, &c.previous, w) }

// at returns the count of window w, nil when c holds no such window.
func (c *counterWindows) at(w int64) *int64 { return counterAt(c.window, &c.current, &c.previous, w) }

// counterRoll moves what is held of a current window and the one before
// it forward to window w (never back): the current becomes the previous,
// or both are over.
func counterRoll[T any](window *int64, cur, prev *T, w int64) {
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

// counterAt returns what is held of window w, nil when it is neither the
// current window nor the one before.
func counterAt[T any](window int64, cur, prev *T, w int64) *T {
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
