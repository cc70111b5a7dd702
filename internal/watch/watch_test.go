package watch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// debouncer runs debounce on channels the test feeds and on a clock it
// moves by hand: each timer debounce starts is handed to the test, which
// fires it when it likes.
type debouncer struct {
	events  chan fsnotify.Event
	errs    chan error
	timers  chan chan time.Time // each timer debounce starts, in order
	changed chan struct{}       // one per call of changed
	done    chan struct{}       // closed when debounce returns
}

func startDebounce(t *testing.T, ctx context.Context) *debouncer {
	t.Helper()
	d := &debouncer{events: make(chan fsnotify.Event), errs: make(chan error), timers: make(chan chan time.Time, 1),
		changed: make(chan struct{}, 10), done: make(chan struct{})}
	after := func(wait time.Duration) <-chan time.Time {
		if wait != Settle {
			t.Errorf("a timer of %v, want Settle (%v)", wait, Settle)
		}
		c := make(chan time.Time, 1)
		d.timers <- c
		return c
	}
	go func() {
		defer close(d.done)
		debounce(ctx, d.events, d.errs, after, func() { d.changed <- struct{}{} })
	}()
	return d
}

// A step of a debounce test: an event or an error arrives, the timer
// started by the n-th of them runs out, or the changes reported so far
// number n.
type step struct {
	event, err bool
	fire       int // 1-based
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			d := startDebounce(t, ctx)
			var started []chan time.Time
			reported, want := 0, 0
			for i, s := range tc.steps {
				switch {
				case s.event:
					d.events <- fsnotify.Event{Name: "policy.yaml", Op: fsnotify.Write}
					started = append(started, <-d.timers)
				case s.err:
					d.errs <- errors.New("queue overflow")
					started = append(started, <-d.timers)
				case s.fire > 0:
					started[s.fire-1] <- time.Time{}
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

// On real files and the real clock: a write, and a rename over the file
// (how editors save), are each reported. How many changes a burst makes
// depends on the scheduler here, so TestDebounce counts them.
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
			if err := os.WriteFile(tmp, []byte("z"), 0o644); err != nil {
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
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var changes atomic.Int32
			if err := Watch(ctx, []string{file}, func() { changes.Add(1) }); err != nil {
				t.Fatal(err)
			}
			tc.change(t, file)
			for deadline := time.Now().Add(timing.Patience); changes.Load() == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no change reported within %v", timing.Patience)
				}
			}
		})
	}
}

func TestMissingPathIsAnError(t *testing.T) {
	if err := Watch(context.Background(), []string{"/nonexistent/floodgate/policy.yaml"}, func() {}); err == nil {
		t.Fatal("watching a missing directory succeeded")
	}
}
