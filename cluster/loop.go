package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// The errors of Start.
var (
	ErrStarted = errors.New("cluster: already started")
	ErrClosed  = errors.New("cluster: closed")
)

// roundLoop runs a strategy's periodic round (its Sync or Tick) on a real
// ticker: what a deployment runs, while tests and the simulator call the
// round themselves on virtual time.
type roundLoop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
}

// start runs round every interval until ctx ends or stop is called;
// failed rounds are logged (the next comes within an interval anyway).
func (l *roundLoop) start(ctx context.Context, every time.Duration, round func(context.Context) error, log *slog.Logger, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return ErrClosed
	case l.done != nil:
		return ErrStarted
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				if err := round(ctx); err != nil && ctx.Err() == nil {
					log.WarnContext(ctx, "cluster: round failed", "strategy", name, "err", err)
				}
			}
		}
	}(l.done)
	return nil
}

// stop ends the loop, if any, and waits for it; later starts fail.
func (l *roundLoop) stop() {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// HonorsDeadline reports that AllowN returns by its context's deadline: it
// decides in memory, and a renewal it makes inline is bounded by the
// context (failover.DeadlineAware, so a failure policy calls it inline).
func (l *Leased) HonorsDeadline() bool { return true }

// HonorsDeadline reports that AllowN decides in memory, never waiting for
// the shared store (failover.DeadlineAware).
func (s *Synced) HonorsDeadline() bool { return true }

// HonorsDeadline reports that AllowN returns by its context's deadline
// (failover.DeadlineAware): a push it makes inline is bounded by it.
func (s *Sampled) HonorsDeadline() bool { return true }
