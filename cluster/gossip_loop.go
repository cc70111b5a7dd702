package cluster

import (
	"context"
	"sync"
	"time"
)

// gossipLoop is the optional background driver of Tick.
type gossipLoop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs Tick every Interval on a real ticker until Close or until ctx
// ends. Calling Start again while it runs does nothing.
func (g *Gossip) Start(ctx context.Context) {
	g.loop.mu.Lock()
	defer g.loop.mu.Unlock()
	if g.loop.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	g.loop.cancel, g.loop.done = cancel, done
	go func() {
		defer close(done)
		t := time.NewTicker(g.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				g.Tick(ctx)
			}
		}
	}()
}

// Close stops the loop Start began and waits for it. The transport (a
// Membership) belongs to the caller, who closes it.
func (g *Gossip) Close() {
	g.loop.mu.Lock()
	cancel, done := g.loop.cancel, g.loop.done
	g.loop.cancel, g.loop.done = nil, nil
	g.loop.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
