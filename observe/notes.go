package observe

import (
	"context"
	"sync/atomic"
)

// Notes carries what the layers under a surface learn about one request's
// decision back up to it, past the floodgate.Limiter interface, whose
// Decision has no room for it: today, that a failure policy decided in the
// store's place (failover calls NoteDegraded). A surface puts Notes in the
// context it decides with and reads them afterwards.
type Notes struct {
	degraded atomic.Bool
	cause    atomic.Pointer[error]
}

// Degraded reports whether a failure policy decided any part of the
// request, and the store's error that made it.
func (n *Notes) Degraded() (bool, error) {
	if !n.degraded.Load() {
		return false, nil
	}
	if p := n.cause.Load(); p != nil {
		return true, *p
	}
	return true, nil
}

// Reset clears the notes, for a surface that reuses them.
func (n *Notes) Reset() {
	n.degraded.Store(false)
	n.cause.Store(nil)
}

type notesKey struct{}

// WithNotes returns a context that carries n.
func WithNotes(ctx context.Context, n *Notes) context.Context {
	return context.WithValue(ctx, notesKey{}, n)
}

// NotesContext is a context that carries its own Notes, for a surface that
// keeps one per request inside a struct it allocates anyway: unlike
// WithNotes, it costs no allocation of its own.
type NotesContext struct {
	context.Context
	Notes Notes
}

// Value implements context.Context.
func (c *NotesContext) Value(key any) any {
	if key == (notesKey{}) {
		return &c.Notes
	}
	return c.Context.Value(key)
}

// NotesFrom returns the Notes ctx carries, or nil.
func NotesFrom(ctx context.Context) *Notes {
	n, _ := ctx.Value(notesKey{}).(*Notes)
	return n
}

// NoteDegraded records in ctx's Notes, if it has any, that a failure
// policy decided instead of the store, because of cause.
func NoteDegraded(ctx context.Context, cause error) {
	n := NotesFrom(ctx)
	if n == nil {
		return
	}
	n.note(cause)
}

func (n *Notes) note(cause error) {
	if cause != nil {
		boxed := cause // only a note with a cause allocates
		n.cause.Store(&boxed)
	}
	n.degraded.Store(true)
}
