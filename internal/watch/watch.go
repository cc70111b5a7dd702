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
	go loop(ctx, w, changed)
	return nil
}

func loop(ctx context.Context, w *fsnotify.Watcher, changed func()) {
	defer w.Close()
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.Events:
			if !ok {
				return
			}
			settle.Reset(Settle)
		case _, ok := <-w.Errors:
			if !ok {
				return
			}
			settle.Reset(Settle) // events may have been lost: check anyway
		case <-settle.C:
			changed()
		}
	}
}
