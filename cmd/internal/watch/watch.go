// Package watch tells when the files of a policy change, so that the
// service can reload its policies without a restart. It watches the
// directories of the paths given (so that editors that replace a file by
// renaming, and Kubernetes ConfigMap symlink swaps, are seen), the
// directories their symbolic links lead to, and the directories holding
// the symbolic links on the way to the paths, so that a swap of a link
// above the policy's directory is seen too: envoyproxy/ratelimit's
// RUNTIME_ROOT (`ln -s new tmp && mv -T tmp current`), or a ConfigMap's
// "..data" when the policy is a directory inside it. It coalesces bursts
// of events, and reports a change only when the files the policy loads
// differ from the last time: a log written next to the policy, or a file
// that stays deleted, is not a change.
package watch

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
)

// Settle is how long events must pause before the files are looked at: an
// editor's save is several events, and a look per event would see
// half-written files.
const Settle = 100 * time.Millisecond

// MaxWait bounds how long a stream of events (a busy log file in the
// policy's directory) can put off a look at the files.
const MaxWait = 10 * Settle

// Watch calls changed once per burst of events under paths after which the
// files config.LoadFiles would read under paths differ (in name, content or
// where their links lead) from when it last called it, or from when Watch
// was called. It returns an error if a path's directory cannot be watched.
func Watch(ctx context.Context, paths []string, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	for _, dir := range dirsOf(paths) {
		if err := w.Add(dir); err != nil {
			w.Close()
			return fmt.Errorf("watch %s: %w", dir, err)
		}
	}
	for _, dir := range linkDirs(paths) {
		_ = w.Add(dir) // best effort: without it a swap above the paths goes unseen, as before
	}
	fp := newFingerprint(paths, w.Add)
	go func() {
		defer w.Close()
		debounce(ctx, w.Events, w.Errors, time.After, func() {
			if fp.changed() {
				changed()
			}
		})
	}()
	return nil
}

// dirsOf lists the directories to watch for paths: a directory itself, a
// file's parent.
func dirsOf(paths []string) []string {
	var dirs []string
	seen := map[string]bool{}
	for _, p := range paths {
		dir := p
		if info, err := os.Stat(p); err != nil || !info.IsDir() {
			dir = filepath.Dir(p)
		}
		if !seen[dir] {
			seen[dir] = true
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// fingerprint remembers the digest of the policy files last seen.
type fingerprint struct {
	paths []string
	watch func(dir string) error // adds a directory to the watch; nil: none
	last  [32]byte
}

func newFingerprint(paths []string, watch func(string) error) *fingerprint {
	f := &fingerprint{paths: paths, watch: watch}
	f.last = f.read()
	return f
}

// read digests the files now and watches where their links lead (a
// ConfigMap's new data directory, a file linked from elsewhere), the
// paths' directories again (after a swap above them, a name now leads to
// another directory: watching it anew watches that one) and the
// directories of the links on the way: adding a directory already watched
// changes nothing, and a deleted one drops out of the watch by itself.
func (f *fingerprint) read() [32]byte {
	files := config.ReadFiles(f.paths...)
	if f.watch != nil {
		for _, dir := range slices.Concat(files.Dirs(), dirsOf(f.paths), linkDirs(f.paths)) {
			_ = f.watch(dir) // best effort: the paths' own directories are watched anyway
		}
	}
	return files.Digest()
}

// maxLinks bounds how many symbolic links linkDirs follows for one path,
// as the kernel does (ELOOP), so that a loop ends.
const maxLinks = 40

// linkDirs lists the directories that hold a symbolic link met on the way
// to each path, its own and those its links' targets go through: where a
// link swap that leads the path elsewhere happens (RUNTIME_ROOT's parent,
// a ConfigMap's mount). A relative target is joined to the link's
// directory, which holds no link by then, so a leading ".." in it is read
// as the kernel reads it. The walk stops, silently, where a name is
// missing.
func linkDirs(paths []string) []string {
	var dirs []string
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		dirs = append(dirs, linkDirsOf(abs)...)
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// linkDirsOf is linkDirs of one absolute, clean path.
func linkDirsOf(path string) []string {
	var dirs []string
	at, rest := string(filepath.Separator), splitPath(path)
	for links := 0; len(rest) > 0; {
		next := filepath.Join(at, rest[0])
		info, err := os.Lstat(next)
		if err != nil {
			break
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			at, rest = next, rest[1:]
			continue
		}
		target, err := os.Readlink(next)
		if links++; err != nil || links > maxLinks {
			break
		}
		dirs = append(dirs, at)
		if !filepath.IsAbs(target) {
			target = filepath.Join(at, target)
		}
		at, rest = string(filepath.Separator), append(splitPath(filepath.Clean(target)), rest[1:]...)
	}
	return dirs
}

// splitPath is the names of an absolute path, root left out.
func splitPath(path string) []string {
	return strings.FieldsFunc(path, func(r rune) bool { return r == filepath.Separator })
}

// changed tells whether the files differ from the last call.
func (f *fingerprint) changed() bool {
	d := f.read()
	if d == f.last {
		return false
	}
	f.last = d
	return true
}

// debounce calls changed once events (or errors, after which events may
// have been lost) have paused for Settle, or MaxWait after the first of
// them if they do not pause, until ctx is done or a channel closes. after
// is time.After; tests pass a clock of their own.
func debounce(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error, after func(time.Duration) <-chan time.Time, changed func()) {
	var settled, deadline <-chan time.Time // nil while nothing is pending
	pending := func() {
		if deadline == nil {
			deadline = after(MaxWait)
		}
		settled = after(Settle)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				return
			}
			pending()
		case _, ok := <-errs:
			if !ok {
				return
			}
			pending() // events may have been lost: look anyway
		case <-settled:
			settled, deadline = nil, nil
			changed()
		case <-deadline:
			settled, deadline = nil, nil
			changed()
		}
	}
}
