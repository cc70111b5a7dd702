package metrics

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-io/floodgate/observe"
)

// The (policy, limit) cache that finds an event's series in one lookup
// holds at most MaxPolicies + MaxLimits pairs, whatever the callers
// report, and a pair finds the same series through it as without it: its
// own below the bounds, _other's past them.
func TestPairCacheIsBoundedAndAgreesWithTheLabelSets(t *testing.T) {
	const maxPolicies, maxLimits = 4, 10
	o, err := New(prometheus.NewRegistry(), Options{MaxPolicies: maxPolicies, MaxLimits: maxLimits})
	if err != nil {
		t.Fatal(err)
	}
	pair := func(i int) (string, string) { return fmt.Sprint("policy-", i%(2*maxPolicies)), fmt.Sprint("limit-", i) }
	const n = 1000
	for round := 1; round <= 2; round++ { // the second finds what the first cached
		for i := range n {
			p, l := pair(i)
			o.Observe(context.Background(), observe.Event{Policy: p, Limit: l, Outcome: observe.Allowed})
			s, wantP := o.series(p, l), o.policy(p)
			if wantL := o.limit(wantP, l); s.p != wantP || s.l != wantL {
				t.Fatalf("round %d: (%s, %s) found series %q/%q, want %q/%q", round, p, l, s.p.label, s.l.label, wantP.label, wantL.label)
			}
		}
	}
	if got, bound := o.nPairs.Load(), int64(maxPolicies+maxLimits); got > bound {
		t.Errorf("%d pairs cached, want at most %d", got, bound)
	}
}
