package engine

import (
	"sync"

	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// scratch is the memory one decision works in: the descriptors as the
// policy reads them and the rules they match, the plan's items and statuses, and the Response's
// descriptors, which point into the statuses. A decision takes one from
// its engine's pool and Response.Release gives it back, so that a service
// answering from the response and then releasing it (as the gRPC surface
// does) allocates none of it per request. Its slices grow to the largest
// request they served, up to keepCap.
type scratch struct {
	descs    []policy.Descriptor
	matches  [][]policy.Rule
	items    []item
	statuses []LimitStatus
	answers  []DescriptorStatus
	pool     *scratchPool
}

// keepCap bounds the slices a pooled scratch keeps: a rare request with
// more limits than that gets its own and does not pin them in the pool.
const keepCap = 64

type scratchPool struct{ pool sync.Pool }

func (p *scratchPool) get() *scratch {
	if sc, _ := p.pool.Get().(*scratch); sc != nil {
		return sc
	}
	return &scratch{pool: p}
}

// put clears what sc held, so that a pooled scratch keeps no request's
// strings or rules alive, and pools it.
func (p *scratchPool) put(sc *scratch) {
	sc.descs = cleared(sc.descs)
	sc.matches = cleared(sc.matches)
	sc.items = cleared(sc.items)
	sc.statuses = cleared(sc.statuses)
	sc.answers = cleared(sc.answers)
	p.pool.Put(sc)
}

// cleared is s emptied and zeroed up to its length, or nil when its
// capacity is past keepCap.
func cleared[T any](s []T) []T {
	if cap(s) > keepCap {
		return nil
	}
	clear(s)
	return s[:0]
}

// grown is s with length n, reusing its array when it is large enough.
func grown[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func (sc *scratch) descsFor(n int) []policy.Descriptor {
	sc.descs = grown(sc.descs, n)
	return sc.descs
}

// matches are the rules of descs in set (policy.Set.MatchAll).
func (sc *scratch) matchesOf(set *policy.Set, domain string, descs []policy.Descriptor) [][]policy.Rule {
	sc.matches = set.AppendMatchAll(sc.matches[:0], domain, descs)
	return sc.matches
}

// itemsFor and statusesFor are empty with room for n: the plan appends.
func (sc *scratch) itemsFor(n int) []item {
	sc.items = grown(sc.items, n)[:0]
	return sc.items
}

func (sc *scratch) statusesFor(n int) []LimitStatus {
	sc.statuses = grown(sc.statuses, n)[:0]
	return sc.statuses
}

func (sc *scratch) answersFor(n int) []DescriptorStatus {
	sc.answers = grown(sc.answers, n)
	return sc.answers
}
