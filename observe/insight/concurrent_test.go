package insight_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/insight"
)

// Observers, queries, Record and a moving clock at once: run with -race.
// Every decision is counted once.
func TestConcurrentUseCountsEveryDecision(t *testing.T) {
	f := newFixture(t, insight.Options{MaxPolicies: 3, Counters: 8, MaxNearLimit: 20})
	const workers, each = 4, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				f.in.Observe(context.Background(), observe.Event{
					Policy: fmt.Sprint("p", (w+i)%5), Limit: "l", Key: fmt.Sprint("k", i%50), Outcome: observe.Outcomes()[i%5], Cost: 1,
					Decision: floodgate.Decision{Limit: 10, Remaining: int64(i % 10), ResetAfter: time.Second}})
			}
		})
	}
	done := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			f.clock.Advance(100 * time.Millisecond)
			f.in.Stats()
			for _, p := range f.in.Policies() {
				if _, err := f.in.Top(p, insight.ByDenied, 8); err != nil {
					t.Error(err)
				}
			}
			if _, err := f.in.NearLimit(insight.AllPolicies, 20); err != nil {
				t.Error(err)
			}
			if _, err := f.in.Events(time.Time{}, 10); err != nil {
				t.Error(err)
			}
			if err := f.in.Record(insight.Event{Kind: "tick"}); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	close(done)
	reader.Wait()
	var total uint64
	for _, p := range f.in.Stats().Policies {
		for _, n := range p.Totals {
			total += n
		}
	}
	if total != workers*each {
		t.Fatalf("%d decisions counted, want %d", total, workers*each)
	}
}
