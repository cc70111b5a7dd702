package floodgate

import (
	"sync"
	"sync/atomic"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// compiledLimit is a validated limit with its algorithm's derived constants.
// Keys under the same limit share one, so an entry stays small and the
// constants stay in cache.
type compiledLimit struct {
	limit  Limit
	params algo.Params
}

// limitCache compiles each distinct limit once. Limits come from
// configuration (a few) or from callers (possibly many), so the cache starts
// over when it grows past maxCachedLimits; entries keep the compiled limits
// they point to.
type limitCache struct {
	byLimit sync.Map // Limit -> *compiledLimit
	size    atomic.Int64
}

const maxCachedLimits = 4096

func (c *limitCache) get(l Limit) (*compiledLimit, error) {
	if v, ok := c.byLimit.Load(l); ok {
		return v.(*compiledLimit), nil
	}
	p, err := l.params()
	if err != nil {
		return nil, err
	}
	if c.size.Add(1) > maxCachedLimits {
		c.byLimit.Clear()
		c.size.Store(1)
	}
	v, _ := c.byLimit.LoadOrStore(l, &compiledLimit{limit: l, params: p})
	return v.(*compiledLimit), nil
}
