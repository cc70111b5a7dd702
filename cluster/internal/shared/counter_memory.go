package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
)

// MemoryCounter is a Counter held in this process, with the semantics of
// RedisCounter: for tests, and for a simulator that puts a virtual network
// around it. It is safe for concurrent use, starts no goroutine and reads
// time only from its Clock, so runs on a ManualClock are deterministic.
type MemoryCounter struct {
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

// NewMemoryCounter returns an empty counter whose windows follow clock.
func NewMemoryCounter(clock floodgate.Clock) (*MemoryCounter, error) {
	if clock == nil {
		return nil, errors.New("cluster: NewMemoryCounter needs a clock")
	}
	return &MemoryCounter{clock: clock, keys: map[counterMemoryKey]*counterMemoryEntry{}}, nil
}

// SetUnavailable makes every later Add fail with an error wrapping
// floodgate.ErrStoreUnavailable (down true), or work again (down false): a
// store outage for tests and simulations.
func (m *MemoryCounter) SetUnavailable(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = down
}

// Add implements Counter.
func (m *MemoryCounter) Add(ctx context.Context, adds []CounterAdd) ([]CounterRead, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := counterValidateAll(adds); err != nil {
		return nil, err
	}
	now := m.clock.Now().UnixMicro()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return nil, fmt.Errorf("cluster: memory counter: %w (set unavailable)", floodgate.ErrStoreUnavailable)
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
	w := max(counterWindowOf(now, period), e.sums.window)
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
func (m *MemoryCounter) sweep(now int64) {
	if len(m.keys) < 2*max(m.swept, 64) {
		return
	}
	for k, e := range m.keys {
		if counterWindowOf(now, k.period) > e.sums.window+1 {
			delete(m.keys, k)
		}
	}
	m.swept = len(m.keys)
}
