package floodgate

import "context"

// Adjuster is a Limiter that can correct, after the fact, what a key was
// charged: a request that reserved an estimate (say 1,000 LLM tokens) and
// turned out to cost another amount (the 3,412 its response reported).
type Adjuster interface {
	Limiter
	// Adjust charges delta more units to key under limit when delta > 0,
	// unconditionally (the work has been done: the key may go into debt, and
	// the requests after it wait for it), and gives -delta units back when
	// delta < 0, never beyond the key's empty, unused state. 0 does nothing.
	Adjust(ctx context.Context, key string, limit Limit, delta int64) error
}
