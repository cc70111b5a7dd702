// Package observetest provides an observe.Observer that records what it is
// told, for tests of code that reports decisions.
package observetest

import (
	"context"
	"sync"

	"github.com/floodgate-io/floodgate/observe"
)

// Recorder is an observe.Spanner that keeps every Event and Summary it is
// given, in order. It is safe for concurrent use.
type Recorder struct {
	mu        sync.Mutex
	events    []observe.Event
	summaries []observe.Summary
	begun     []string // "surface/policy" of each Begin
}

// Observe implements observe.Observer.
func (r *Recorder) Observe(_ context.Context, e observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Begin implements observe.Spanner.
func (r *Recorder) Begin(ctx context.Context, surface, policy string) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.begun = append(r.begun, surface+"/"+policy)
	return ctx
}

// End implements observe.Spanner.
func (r *Recorder) End(_ context.Context, s observe.Summary) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.summaries = append(r.summaries, s)
}

// Events returns a copy of the events so far.
func (r *Recorder) Events() []observe.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observe.Event(nil), r.events...)
}

// Summaries returns a copy of the summaries so far.
func (r *Recorder) Summaries() []observe.Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observe.Summary(nil), r.summaries...)
}

// Begun returns "surface/policy" for each request begun so far.
func (r *Recorder) Begun() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.begun...)
}

// Reset forgets everything recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events, r.summaries, r.begun = nil, nil, nil
}
