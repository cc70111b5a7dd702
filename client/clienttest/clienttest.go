// Package clienttest provides time that tests of code using package client
// (the HTTP transport, grpclimit's client interceptors) control: a manual
// clock and a Sleeper that moves it instead of sleeping.
package clienttest

import (
	"context"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/client"
)

// Time is a manual clock and a sleeper that advances it by each wait
// instead of sleeping, recording every wait. It starts at the real time so
// that contexts with real deadlines far ahead compare sensibly with it. It
// is safe for concurrent use.
type Time struct {
	Clock *floodgate.ManualClock
	mu    sync.Mutex
	waits []time.Duration
}

// NewTime returns a Time at the real time now.
func NewTime() *Time { return &Time{Clock: floodgate.NewManualClock(time.Now())} }

// Sleep is a client.Sleeper: it records d and moves the clock by it, or
// returns ctx's error when ctx is done.
func (t *Time) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	t.waits = append(t.waits, d)
	t.mu.Unlock()
	t.Clock.Advance(d)
	return nil
}

// Slept returns the waits so far, in order.
func (t *Time) Slept() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.waits...)
}

// Option makes a transport or interceptor run on t (client.WithClock).
func (t *Time) Option() client.Option { return client.WithClock(t.Clock, t.Sleep) }

var _ client.Sleeper = (&Time{}).Sleep
