package cluster

import (
	"context"
)

// gossipLoop is the optional background driver of Tick.
// Start runs Tick every Interval on a real ticker until Close or until ctx
// ends. It fails with ErrStarted while running, ErrClosed after Close.
func (g *Gossip) Start(ctx context.Context) error {
	return g.loop.start(ctx, g.interval, func(ctx context.Context) error { g.Tick(ctx); return nil }, g.logger, "gossip")
}

// Close stops the loop Start began and waits for it. The transport (a
// Membership) belongs to the caller, who closes it.
func (g *Gossip) Close() { g.loop.stop() }
