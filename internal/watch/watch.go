// Package watch tells when configuration files change, so that the service
// can reload its policies without a restart: it watches the files and
// directories given (their parent directories, so that editors that replace
// a file by renaming, and Kubernetes ConfigMap symlink swaps, are seen) and
// coalesces bursts of events into one notification.
package watch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Settle is how long events must pause before a change is reported: an
// editor's save is several events, and a reload per event would read
// half-written files.
const Settle = 100 * time.Millisecond

// Watch calls changed once per burst of changes under paths until ctx is
// done. It returns an error if a path cannot be watched.
func Watch(ctx context.Context, paths []string, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	dirs := map[string]bool{}
	for _, p := range paths {
		dir := p
		if info, err := os.Stat(p); err == nil && !info.IsDir() {
			dir = filepath.Dir(p)
		}
		if dirs[dir] {
			continue
		}
		if err := w.Add(dir); err != nil {
			w.Close()
			return fmt.Errorf("watch %s: %w", dir, err)
		}
		dirs[dir] = true
	}
	go func() {
		defer w.Close()
		debounce(ctx, w.Events, w.Errors, time.After, changed)
	}()
	return nil
}

// debounce calls changed once events (or errors, after which events may
// have been lost) have paused for Settle, until ctx is done or a channel
// closes. after is time.After; tests pass a clock of their own.
func debounce(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error, after func(time.Duration) <-chan time.Time, changed func()) {
	var settled <-chan time.Time // nil while nothing is pending
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				return
			}
			settled = after(Settle)
		case _, ok := <-errs:
			if !ok {
				return
			}
			settled = after(Settle) // events may have been lost: check anyway
		case <-settled:
			settled = nil
			changed()
		}
	}
}
