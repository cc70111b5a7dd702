package floodgate

import (
	"github.com/floodgate-io/floodgate/internal/algo"
	"github.com/floodgate-io/floodgate/internal/memo"
)

// compiledLimit is a validated limit with its algorithm's derived constants.
// Keys under the same limit share one, so a slot stays small and the
// constants stay in cache.
type compiledLimit struct {
	limit  Limit
	params algo.Params
}

// limitCache compiles each distinct limit once (deriving costs a GCD).
type limitCache struct {
	memo memo.Cache[Limit, *compiledLimit]
}

func (c *limitCache) get(l Limit) (*compiledLimit, error) {
	return c.memo.Get(l, compileLimit)
}

func compileLimit(l Limit) (*compiledLimit, error) {
	p, err := l.params()
	if err != nil {
		return nil, err
	}
	return &compiledLimit{limit: l, params: p}, nil
}
