// Package memo remembers the results of a costly pure function of a few
// distinct inputs, such as compiling a rate limit, so that hot paths look the
// result up instead of deriving it again.
package memo

import (
	"sync"
	"sync/atomic"
)

// Cache maps keys to the values build made of them. It is safe for
// concurrent use. Its inputs may come from callers (unbounded), so it starts
// over once it holds more than Max values; values already handed out stay
// valid. Errors are not cached.
type Cache[K comparable, V any] struct {
	Max   int // 0: 4096
	items sync.Map
	size  atomic.Int64
}

// Get returns the value for k, building it on first use.
func (c *Cache[K, V]) Get(k K, build func(K) (V, error)) (V, error) {
	if v, ok := c.items.Load(k); ok {
		return v.(V), nil
	}
	v, err := build(k)
	if err != nil {
		return v, err
	}
	if c.size.Add(1) > int64(c.max()) {
		c.items.Clear()
		c.size.Store(1)
	}
	actual, _ := c.items.LoadOrStore(k, v)
	return actual.(V), nil
}

func (c *Cache[K, V]) max() int {
	if c.Max > 0 {
		return c.Max
	}
	return 4096
}
