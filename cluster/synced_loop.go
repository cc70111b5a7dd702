package cluster

import (
	"context"
	"errors"
	"sync"
	"time"
)

// syncedLoop runs a Synced's rounds on a real ticker.
type syncedLoop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
}

// Start runs Sync every Interval on a background goroutine until ctx ends
// or Close is called; failed rounds are logged. It fails if the loop is
// already running or the limiter is closed.
func (s *Synced) Start(ctx context.Context) error {
	s.loop.mu.Lock()
	defer s.loop.mu.Unlock()
	switch {
	case s.loop.closed:
		return errors.New("cluster: synced: Start after Close")
	case s.loop.done != nil:
		return errors.New("cluster: synced: already started")
	}
	ctx, s.loop.cancel = context.WithCancel(ctx)
	s.loop.done = make(chan struct{})
	go s.run(ctx, s.loop.done)
	return nil
}

func (s *Synced) run(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	ticker := time.NewTicker(s.every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "cluster: synced round failed", "err", err)
			}
		}
	}
}

// Close stops the background loop, if any, and waits for it to end. The
// limiter keeps deciding on what it last knew; calling Close again does
// nothing.
func (s *Synced) Close() {
	s.loop.mu.Lock()
	s.loop.closed = true
	cancel, done := s.loop.cancel, s.loop.done
	s.loop.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
