package insight_test

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/insight"
)

func Example() {
	clock := floodgate.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	in, err := insight.New(insight.Options{Clock: clock})
	if err != nil {
		panic(err)
	}
	// A surface reports every limit's decision.
	ctx := context.Background()
	for i := range 30 {
		key := []string{"alice", "bob", "mallory"}[i%3]
		e := observe.Event{Policy: "api", Limit: "per-user", Key: key, Outcome: observe.Allowed, Cost: 1,
			Decision: floodgate.Decision{Limit: 10, Remaining: int64(10 - i/3 - 1), ResetAfter: time.Minute}}
		if key == "mallory" && i > 20 {
			e.Outcome = observe.Denied
		}
		in.Observe(ctx, e)
	}
	top, _ := in.Top("api", insight.ByDenied, 3)
	for _, e := range top.Entries {
		fmt.Printf("denied: %s %d (±%d)\n", e.Key, e.Count, e.Error)
	}
	near, _ := in.NearLimit(insight.AllPolicies, 10)
	for _, e := range near {
		fmt.Printf("near limit: %s %.0f%%, resets at %s\n", e.Key, e.Used*100, e.ResetAt.Format(time.TimeOnly))
	}
	// Output:
	// denied: mallory 3 (±0)
	// near limit: alice 100%, resets at 12:01:00
	// near limit: bob 100%, resets at 12:01:00
	// near limit: mallory 100%, resets at 12:01:00
}
