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
	keys  map[counterMemoryKey]*counterWindows
	swept int // len(keys) after the last sweep
	down  bool
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
	return &MemoryCounter{clock: clock, keys: map[counterMemoryKey]*counterWindows{}}, nil
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
		period := int64(a.Period / time.Microsecond)
		c := m.windows(counterMemoryKey{a.Key, period})
		c.advance(now, period)
		c.add(a.Window, a.Delta)
		c.add(a.Window-1, a.PrevDelta)
		reads[i] = CounterRead{Now: now, Window: c.window, Current: c.current, Previous: c.previous}
	}
	m.sweep(now)
	return reads, nil
}

// windows returns a key's counts, creating them empty.
func (m *MemoryCounter) windows(k counterMemoryKey) *counterWindows {
	c, ok := m.keys[k]
	if !ok {
		c = &counterWindows{window: -1 << 62}
		m.keys[k] = c
	}
	return c
}

// sweep drops the keys whose both windows are over, as Redis expires them,
// once the map has doubled since the last sweep: amortised O(1) per add.
func (m *MemoryCounter) sweep(now int64) {
	if len(m.keys) < 2*max(m.swept, 64) {
		return
	}
	for k, c := range m.keys {
		if counterWindowOf(now, k.period) > c.window+1 {
			delete(m.keys, k)
		}
	}
	m.swept = len(m.keys)
}
