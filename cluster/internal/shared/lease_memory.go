package shared

import (
	"context"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
)

// Coordinator is a cluster.Coordinator in this process's memory, with the
// same semantics as cluster.RedisCoordinator: clustertest.Coordinator, for
// tests and for simulations that put a virtual network around it. It
// starts no goroutine and reads time only from its Clock, so it is
// deterministic under a floodgate.ManualClock. It is safe for concurrent
// use. It forgets a key only when the key's period changes, so it suits
// bounded sets of keys.
type Coordinator struct {
	clock floodgate.Clock
	mu    sync.Mutex
	keys  map[string]*leaseKeyBook
}

// leaseKeyBook is one key's records in a Coordinator.
type leaseKeyBook struct {
	period time.Duration
	nodes  map[string]leaseNode
}

// NewCoordinator returns an empty coordinator whose windows follow clock,
// which must not be nil.
func NewCoordinator(clock floodgate.Clock) *Coordinator {
	return &Coordinator{clock: clock, keys: map[string]*leaseKeyBook{}}
}

// Renew implements cluster.Coordinator.
func (c *Coordinator) Renew(ctx context.Context, req LeaseRequest) (LeaseGrant, error) {
	if err := ctx.Err(); err != nil {
		return LeaseGrant{}, err
	}
	if err := CheckLease(req); err != nil {
		return LeaseGrant{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	book := c.keys[req.Key]
	if book == nil || book.period != req.Period {
		book = &leaseKeyBook{period: req.Period, nodes: map[string]leaseNode{}}
		c.keys[req.Key] = book
	}
	out := leaseRenewBook(book.nodes, req, c.clock.Now().UnixMicro())
	for _, name := range out.drop {
		delete(book.nodes, name)
	}
	book.nodes[req.Node] = out.self
	return out.grant, nil
}

// Leased returns the units of the current window (by the coordinator's
// clock) leased on key to all nodes together: what the no-overshoot
// invariant bounds by the window's budget.
func (c *Coordinator) Leased(key string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	book := c.keys[key]
	if book == nil {
		return 0
	}
	window := WindowOf(c.clock.Now().UnixMicro(), int64(book.period/time.Microsecond))
	var sum int64
	for _, n := range book.nodes {
		if n.window == window {
			sum += n.granted
		}
	}
	return sum
}
