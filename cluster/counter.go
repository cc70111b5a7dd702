package cluster

import (
	"context"
	"time"

	"github.com/floodgate-io/floodgate/cluster/internal/shared"
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
// per key, pipelined) and clustertest.Counter (plain Go, for tests and
// simulation).
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

// counterValidateAll checks a whole batch before any of it is applied, with
// the rules every Counter shares, so that a bad add fails the whole batch
// with an error naming it.
func counterValidateAll(adds []CounterAdd) error {
	for i, a := range adds {
		if err := shared.ValidateAdd(i, shared.CounterAdd(a)); err != nil {
			return err
		}
	}
	return nil
}
