package adaptive

import "fmt"

// Fixed is an Algorithm whose limit never changes: `--concurrency N`, and a
// baseline to compare the learning algorithms with.
type Fixed struct{ n int }

// NewFixed returns an Algorithm that always answers n; n must be at least 1.
func NewFixed(n int) (*Fixed, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: fixed limit %d: want at least 1", ErrInvalidOptions, n)
	}
	return &Fixed{n: n}, nil
}

// Limit is the fixed limit.
func (f *Fixed) Limit() int { return f.n }

// Update ignores the sample and returns the fixed limit.
func (f *Fixed) Update(Sample) int { return f.n }
