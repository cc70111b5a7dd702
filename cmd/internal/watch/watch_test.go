package watch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// debouncer runs debounce on channels the test feeds and on a clock it
// moves by hand: each timer debounce starts is handed to the test, which
// fires it when it likes.
type debouncer struct {
	events  chan fsnotify.Event
	errs    chan error
	timers  chan timer    // each timer debounce starts, in order
	changed chan struct{} // one per call of changed
	done    chan struct{} // closed when debounce returns
}

type timer struct {
	wait time.Duration
	c    chan time.Time
}

func startDebounce(t *testing.T, ctx context.Context) *debouncer {
	t.Helper()
	d := &debouncer{events: make(chan fsnotify.Event), errs: make(chan error), timers: make(chan timer, 2),
		changed: make(chan struct{}, 10), done: make(chan struct{})}
	after := func(wait time.Duration) <-chan time.Time {
		if wait != Settle && wait != MaxWait {
			t.Errorf("a timer of %v, want Settle (%v) or MaxWait (%v)", wait, Settle, MaxWait)
		}
		c := make(chan time.Time, 1)
		d.timers <- timer{wait, c}
		return c
	}
	go func() {
		defer close(d.done)
		debounce(ctx, d.events, d.errs, after, func() { d.changed <- struct{}{} })
	}()
	return d
}

// A step of a debounce test: an event or an error arrives, the Settle
// timer started by the n-th of them runs out, the MaxWait timer of the
// n-th burst runs out, or the changes reported so far number n.
type step struct {
	event, err bool
	fire       int // 1-based
	fireMax    int // 1-based
	changes    int
	check      bool
}

// Changes are reported Settle after the last of a burst of events: a timer
// that a later event superseded reports nothing, whenever it runs out. The
// test waits for the loop to take each event and for each change it
// expects, so the outcome does not depend on the scheduler; a change too
// many shows in the count once the loop has stopped.
func TestDebounce(t *testing.T) {
	ev, er := step{event: true}, step{err: true}
	fire := func(n int) step { return step{fire: n} }
	fireMax := func(n int) step { return step{fireMax: n} }
	changes := func(n int) step { return step{check: true, changes: n} }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"one event", []step{ev, changes(0), fire(1), changes(1)}},
		{"a burst is one change", []step{ev, ev, ev, ev, ev, fire(5), changes(1)}},
		{"a superseded timer reports nothing", []step{ev, ev, fire(1), ev, fire(3), changes(1), fire(2), ev, changes(1), fire(4), changes(2)}},
		{"an error counts as an event", []step{ev, er, fire(1), ev, fire(3), changes(1)}},
		{"bursts apart are changes apart", []step{ev, fire(1), changes(1), ev, ev, fire(3), changes(2), er, fire(4), changes(3)}},
		{"a burst that does not pause is cut at MaxWait", []step{ev, ev, ev, fireMax(1), changes(1), ev, fire(3), changes(1), fire(4), changes(2)}},
		{"after MaxWait a new burst has its own", []step{ev, fireMax(1), changes(1), ev, fireMax(1), ev, fireMax(2), changes(2), fire(3), changes(2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			d := startDebounce(t, ctx)
			var started, maxWaits []chan time.Time
			take := func() { // the timers one event starts: MaxWait first in a burst, then Settle
				for tm := <-d.timers; ; tm = <-d.timers {
					if tm.wait == MaxWait {
						maxWaits = append(maxWaits, tm.c)
						continue
					}
					started = append(started, tm.c)
					return
				}
			}
			reported, want := 0, 0
			for i, s := range tc.steps {
				switch {
				case s.event:
					d.events <- fsnotify.Event{Name: "policy.yaml", Op: fsnotify.Write}
					take()
				case s.err:
					d.errs <- errors.New("queue overflow")
					take()
				case s.fire > 0:
					started[s.fire-1] <- time.Time{}
				case s.fireMax > 0:
					maxWaits[s.fireMax-1] <- time.Time{}
				case s.check:
					want = s.changes
					for ; reported < want; reported++ {
						select {
						case <-d.changed:
						case <-time.After(timing.Patience):
							t.Fatalf("step %d: %d changes reported, want %d", i, reported, want)
						}
					}
				}
			}
			cancel()
			<-d.done
			if reported += len(d.changed); reported != want {
				t.Fatalf("%d changes reported in all, want %d", reported, want)
			}
		})
	}
}

// debounce returns when its context ends or the watcher closes a channel.
func TestDebounceStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(context.CancelFunc, *debouncer)
	}{
		{"context done", func(cancel context.CancelFunc, _ *debouncer) { cancel() }},
		{"events closed", func(_ context.CancelFunc, d *debouncer) { close(d.events) }},
		{"errors closed", func(_ context.CancelFunc, d *debouncer) { close(d.errs) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			d := startDebounce(t, ctx)
			tc.stop(cancel, d)
			select {
			case <-d.done:
			case <-time.After(timing.Patience):
				t.Fatal("debounce still running")
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A change is what alters the files the policy loads, seen once: not a log
// written next to them, nor a file that stays deleted; but an edit, a
// rename over the file, a file added to a directory, and a ConfigMap's
// symlink swap, whether the path given is the directory or the file.
func TestFingerprintSeesOnlyThePolicyFiles(t *testing.T) {
	type change struct {
		name   string
		do     func(dir string)
		change bool
	}
	write := func(name, content string) func(string) {
		return func(dir string) { must(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)) }
	}
	remove := func(name string) func(string) {
		return func(dir string) { must(t, os.Remove(filepath.Join(dir, name))) }
	}
	renameOver := func(name, content string) func(string) {
		return func(dir string) {
			write(".tmp", content)(dir)
			must(t, os.Rename(filepath.Join(dir, ".tmp"), filepath.Join(dir, name)))
		}
	}
	plain := []change{
		{"a log written next to the policy", write("serve.log", "level=INFO msg=reloaded"), false},
		{"the log again", write("serve.log", "level=INFO msg=reloaded\nlevel=INFO msg=reloaded"), false},
		{"an edit", write("p.yaml", "domain: b\n"), true},
		{"the same bytes saved again", write("p.yaml", "domain: b\n"), false},
		{"a rename over the file", renameOver("p.yaml", "domain: c\n"), true},
		{"the file deleted", remove("p.yaml"), true},
		{"the log while the file is gone", write("serve.log", "level=ERROR msg=failed"), false},
		{"the file back", write("p.yaml", "domain: d\n"), true},
	}
	for _, tc := range []struct {
		name    string
		path    func(dir string) string
		changes []change
	}{
		{"the file given", func(dir string) string { return filepath.Join(dir, "p.yaml") }, plain},
		{"its directory given", func(dir string) string { return dir }, append(plain,
			change{"another policy file", write("q.yml", "domain: q\n"), true},
			change{"a file that is not a policy", write("notes.txt", "x"), false})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write("p.yaml", "domain: a\n")(dir)
			fp := newFingerprint([]string{tc.path(dir)}, nil)
			for _, c := range tc.changes {
				c.do(dir)
				if got := fp.changed(); got != c.change {
					t.Errorf("%s: changed %v, want %v", c.name, got, c.change)
				}
			}
		})
	}
	for _, given := range []string{"file", "directory"} {
		t.Run("a ConfigMap swap, the "+given+" given", func(t *testing.T) {
			cm := servicetest.NewConfigMap(t, map[string]string{"p.yaml": "domain: a\n"})
			path := cm.Dir
			if given == "file" {
				path = filepath.Join(cm.Dir, "p.yaml")
			}
			fp := newFingerprint([]string{path}, nil)
			cm.Update(map[string]string{"p.yaml": "domain: b\n"})
			if !fp.changed() {
				t.Error("a swap to new content: no change")
			}
			cm.Update(map[string]string{"p.yaml": "domain: b\n"})
			if !fp.changed() {
				t.Error("a swap to the same content: no change (the link leads elsewhere, so a reload confirms it)")
			}
			if fp.changed() {
				t.Error("nothing happened, and a change was seen")
			}
		})
	}
}

// On real files and the real clock, through fsnotify: a write, a rename
// over the file (how editors save) and a ConfigMap swap are each reported;
// a log written next to the policy is not (changed checks that the policy
// was edited when it is called). How many changes a burst makes depends on
// the scheduler here, so TestDebounce counts them.
func TestWatchSeesWritesAndRenames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, file string)
	}{
		{"write", func(t *testing.T, file string) {
			if err := os.WriteFile(file, []byte("b"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"rename over", func(t *testing.T, file string) {
			tmp := filepath.Join(filepath.Dir(file), ".policy.yaml.tmp")
			if err := os.WriteFile(tmp, []byte("b"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, file); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "policy.yaml")
			if err := os.WriteFile(file, []byte("a"), 0o644); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(filepath.Dir(file), "serve.log")
			var changes, early atomic.Int32
			watchUntilChanged(t, file, func() {
				if data, _ := os.ReadFile(file); string(data) != "b" {
					early.Add(1)
				}
				changes.Add(1)
			}, func() {
				for i := range 20 {
					must(t, os.WriteFile(log, []byte(strings.Repeat("log line\n", i+1)), 0o644))
				}
				tc.change(t, file)
			}, &changes)
			if early.Load() > 0 {
				t.Errorf("%d changes reported before the policy was edited (the log next to it)", early.Load())
			}
		})
	}
	t.Run("ConfigMap swap", func(t *testing.T) {
		cm := servicetest.NewConfigMap(t, map[string]string{"policy.yaml": "a"})
		var changes atomic.Int32
		watchUntilChanged(t, filepath.Join(cm.Dir, "policy.yaml"), func() { changes.Add(1) },
			func() { cm.Update(map[string]string{"policy.yaml": "b"}) }, &changes)
	})
}

// watchUntilChanged watches path, makes a change, and waits until changed
// has been called.
func watchUntilChanged(t *testing.T, path string, changed func(), change func(), changes *atomic.Int32) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := Watch(ctx, []string{path}, changed); err != nil {
		t.Fatal(err)
	}
	change()
	for deadline := time.Now().Add(timing.Patience); changes.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no change reported within %v", timing.Patience)
		}
	}
}

func TestMissingPathIsAnError(t *testing.T) {
	if err := Watch(context.Background(), []string{"/nonexistent/floodgate/policy.yaml"}, func() {}); err == nil {
		t.Fatal("watching a missing directory succeeded")
	}
}
