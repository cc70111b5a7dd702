package cluster

import (
	"context"
	"errors"
	"sync"
	"time"
)

// leasedSyncWorkers bounds the renewals one Sync runs at once: enough to
// fill a pipelined Redis connection, few enough to stay polite.
const leasedSyncWorkers = 32

// Sync does one round of the periodic work: it renews the lease of every
// key that saw requests since its last report, and gives back and forgets
// the keys idle for a whole Interval. Start calls it every Interval; tests
// and simulations call it on their own clock. It returns the errors of the
// renewals that failed, joined (the keys concerned keep their leases until
// they end, then use the safe capacity).
func (l *Leased) Sync(ctx context.Context) error {
	keys, entries := l.snapshot()

	errs := make([]error, len(keys))
	sem := make(chan struct{}, leasedSyncWorkers)
	var wg sync.WaitGroup
	for i := range keys {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = l.syncKey(ctx, keys[i], entries[i])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// syncKey renews one key's lease, or gives it back when the key was idle
// for an Interval. It waits for the answer as a request would (at most the
// Timeout), so that a slow coordinator never holds up a round: the renewal
// goes on, and its answer is applied when it arrives.
func (l *Leased) syncKey(ctx context.Context, key string, e *leasedEntry) error {
	e.mu.Lock()
	if e.gone || e.flight != nil {
		e.mu.Unlock()
		return nil
	}
	now := l.clock.Now()
	if e.requested == 0 && (e.reportedAt.IsZero() || now.Sub(e.reportedAt) >= l.cfg.Interval) {
		return l.releaseUnlock(ctx, key, e, now)
	}
	f := l.renewUnlock(ctx, e, key, e.limit, now, false)
	_, err := l.await(ctx, f)
	return err
}

// releaseUnlock forgets an idle key and, when its lease still holds unused
// units of the current window, gives them back to the coordinator. It
// unlocks e. The entry stays in place, admitting nothing, until the
// coordinator has answered: a new entry's renewal must not overtake the
// release, or the release would shrink a grant the new entry relies on.
func (l *Leased) releaseUnlock(ctx context.Context, key string, e *leasedEntry, now time.Time) error {
	if !e.valid(now) || e.used >= e.granted {
		l.forgetLocked(key, e)
		e.mu.Unlock()
		return nil
	}
	f := l.renewUnlock(ctx, e, key, e.limit, now, true)
	_, err := l.await(ctx, f)
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// forgetLocked drops e, locked, from the keys: requests holding it look
// the key up again.
func (l *Leased) forgetLocked(key string, e *leasedEntry) {
	l.entries.CompareAndDelete(key, e)
	e.gone = true
}

// Release gives back the unused units of every lease and forgets every key,
// as a node does before it leaves. Requests after it take new leases.
func (l *Leased) Release(ctx context.Context) error {
	keys, entries := l.snapshot()
	var errs []error
	for i, e := range entries {
		e.mu.Lock()
		if e.gone || e.flight != nil {
			e.mu.Unlock()
			continue
		}
		errs = append(errs, l.releaseUnlock(ctx, keys[i], e, l.clock.Now()))
	}
	return errors.Join(errs...)
}

// snapshot lists the keys and their entries.
func (l *Leased) snapshot() ([]string, []*leasedEntry) {
	var keys []string
	var entries []*leasedEntry
	l.entries.Range(func(k, v any) bool {
		keys, entries = append(keys, k.(string)), append(entries, v.(*leasedEntry))
		return true
	})
	return keys, entries
}

// Start runs Sync every Interval on a real ticker, in a goroutine of its
// own, until Close or until ctx ends. It fails with ErrStarted while
// running, ErrClosed after Close.
func (l *Leased) Start(ctx context.Context) error {
	return l.loop.start(ctx, l.cfg.Interval, l.Sync, l.log, "leased")
}

// Close stops the loop of Start, if running, gives back the unused units
// of every lease (waiting at most the Timeout for each), so that the other
// nodes can use them before the window ends, then ends the renewals still
// in flight and waits for their goroutines.
func (l *Leased) Close() {
	l.loop.stop()
	_ = l.Release(context.Background())
	l.close()
	l.flights.closeAndWait()
	l.safe.Close()
}
