package cluster

import (
	"context"
)

// Start runs Sync every Interval on a background goroutine until ctx ends
// or Close is called; failed rounds are logged. It fails with ErrStarted
// while running, ErrClosed after Close.
func (s *Synced) Start(ctx context.Context) error {
	return s.loop.start(ctx, s.every, s.Sync, s.log, "synced")
}

// Close stops the background loop, if any, and waits for it to end. The
// limiter keeps deciding on what it last knew; calling Close again does
// nothing.
func (s *Synced) Close() { s.loop.stop() }
