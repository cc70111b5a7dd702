// Package clustertest provides in-memory stand-ins for the shared state of
// package cluster's strategies, for the tests of a service built on them
// (as net/http/httptest does for HTTP): a Counter for the synced and
// sampled strategies, a Coordinator for the leased one. They keep the
// semantics of cluster.RedisCounter and cluster.RedisCoordinator exactly,
// need no Redis, start no goroutine and read time only from the
// floodgate.Clock they are given, so that a test on a
// floodgate.ManualClock is deterministic. Both are safe for concurrent use.
package clustertest

import (
	"context"
	"errors"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cluster/internal/shared"
)

// Counter is a cluster.Counter in this process's memory. Its windows
// follow its Clock as a RedisCounter's follow the Redis server's, and it
// drops a key once both its windows are over, as Redis expires it.
type Counter struct {
	m *shared.Counter
}

// NewCounter returns an empty counter whose windows follow clock.
func NewCounter(clock floodgate.Clock) (*Counter, error) {
	if clock == nil {
		return nil, errors.New("clustertest: NewCounter needs a clock")
	}
	return &Counter{m: shared.NewCounter(clock)}, nil
}

// Add implements cluster.Counter.
func (c *Counter) Add(ctx context.Context, adds []cluster.CounterAdd) ([]cluster.CounterRead, error) {
	in := make([]shared.CounterAdd, len(adds))
	for i, a := range adds {
		in[i] = shared.CounterAdd(a)
	}
	reads, err := c.m.Add(ctx, in)
	if err != nil {
		return nil, err
	}
	out := make([]cluster.CounterRead, len(reads))
	for i, r := range reads {
		out[i] = cluster.CounterRead(r)
	}
	return out, nil
}

// SetUnavailable makes every later Add fail with an error wrapping
// floodgate.ErrStoreUnavailable, applying nothing (down true), or work
// again (down false): a store outage, to test what a strategy does then.
func (c *Counter) SetUnavailable(down bool) { c.m.SetUnavailable(down) }

// Coordinator is a cluster.Coordinator in this process's memory, giving
// the answers of a RedisCoordinator whose Clock is its own. It forgets a
// key only when the key's period changes, so it suits the bounded sets of
// keys of a test.
type Coordinator struct {
	m *shared.Coordinator
}

// NewCoordinator returns an empty coordinator whose windows follow clock.
func NewCoordinator(clock floodgate.Clock) (*Coordinator, error) {
	if clock == nil {
		return nil, errors.New("clustertest: NewCoordinator needs a clock")
	}
	return &Coordinator{m: shared.NewCoordinator(clock)}, nil
}

// Renew implements cluster.Coordinator.
func (c *Coordinator) Renew(ctx context.Context, req cluster.LeaseRequest) (cluster.LeaseGrant, error) {
	g, err := c.m.Renew(ctx, shared.LeaseRequest(req))
	return cluster.LeaseGrant(g), err
}

// Leased returns the units of the current window (by the coordinator's
// clock) leased on key to all nodes together: what the leased strategy
// promises never exceeds the window's budget, which a test can check.
func (c *Coordinator) Leased(key string) int64 { return c.m.Leased(key) }
