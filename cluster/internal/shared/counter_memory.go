package shared

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
)

// Counter is a cluster.Counter held in this process, with the semantics of
// cluster.RedisCounter: clustertest.Counter, for tests and for a simulator
// that puts a virtual network around it. It is safe for concurrent use,
// starts no goroutine and reads time only from its Clock, so runs on a
// ManualClock are deterministic.
type Counter struct {
	clock floodgate.Clock

	mu    sync.Mutex
	keys  map[counterMemoryKey]*counterMemoryEntry
	swept int // len(keys) after the last sweep
	down  bool
}

// counterMemoryEntry is one key's counts: the sums, and each node's.
type counterMemoryEntry struct {
	sums  counterWindows
	nodes map[string]*counterWindows
}

type counterMemoryKey struct {
	key    string
	period int64
}

// NewCounter returns an empty counter whose windows follow clock, which
// must not be nil.
func NewCounter(clock floodgate.Clock) *Counter {
	return &Counter{clock: clock, keys: map[counterMemoryKey]*counterMemoryEntry{}}
}

// SetUnavailable makes every later Add fail with an error wrapping
// floodgate.ErrStoreUnavailable (down true), or work again (down false): a
// store outage for tests and simulations.
func (m *Counter) SetUnavailable(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = down
}

// Add implements cluster.Counter.
func (m *Counter) Add(ctx context.Context, adds []CounterAdd) ([]CounterRead, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, a := range adds {
		if err := ValidateAdd(i, a); err != nil {
			return nil, err
		}
	}
	now := m.clock.Now().UnixMicro()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return nil, fmt.Errorf("clustertest: counter: %w (set unavailable)", floodgate.ErrStoreUnavailable)
	}
	reads := make([]CounterRead, len(adds))
	for i, a := range adds {
		k := counterMemoryKey{a.Key, int64(a.Period / time.Microsecond)}
		e, ok := m.keys[k]
		if !ok {
			e = &counterMemoryEntry{sums: counterWindows{window: -1 << 62}, nodes: map[string]*counterWindows{}}
			m.keys[k] = e
		}
		var gone bool
		reads[i], gone = e.merge(now, k.period, a)
		if gone {
			delete(m.keys, k)
		}
	}
	m.sweep(now)
	return reads, nil
}

// merge applies one add at the store's time now, as lua/counter_add.lua
// does; gone reports that the key holds nothing any more and goes.
func (e *counterMemoryEntry) merge(now, period int64, a CounterAdd) (r CounterRead, gone bool) {
	w := max(WindowOf(now, period), e.sums.window)
	rolled := w > e.sums.window
	e.sums.roll(w)
	n, ok := e.nodes[a.Node]
	if !ok {
		n = &counterWindows{window: w}
		e.nodes[a.Node] = n
	}
	n.roll(w)
	counterMerge(&e.sums, n, a.Window, a.Count)
	counterMerge(&e.sums, n, a.Window-1, a.PrevCount)
	r = CounterRead{Now: now, Window: w, Current: e.sums.current, Previous: e.sums.previous,
		Own: n.current, OwnPrevious: n.previous}
	if rolled {
		if e.sums.current == 0 && e.sums.previous == 0 {
			return r, true
		}
		for name, n := range e.nodes { // counts no decision reads any more
			if n.window < w-1 {
				delete(e.nodes, name)
			}
		}
	}
	return r, false
}

// sweep drops the keys whose both windows are over, as Redis expires them,
// once the map has doubled since the last sweep: amortised O(1) per add.
func (m *Counter) sweep(now int64) {
	if len(m.keys) < 2*max(m.swept, 64) {
		return
	}
	for k, e := range m.keys {
		if WindowOf(now, k.period) > e.sums.window+1 {
			delete(m.keys, k)
		}
	}
	m.swept = len(m.keys)
}
