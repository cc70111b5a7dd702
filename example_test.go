package floodgate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
)

// A limit of 2 requests per second with a burst of 3, decided in memory on
// a manual clock so that the output is the same on every run: the burst
// passes, the fourth request is told when to come back, and after that
// wait it passes.
func ExampleNewMemory() {
	clock := floodgate.NewManualClock(time.Unix(1_700_000_000, 0))
	limiter := floodgate.NewMemory(floodgate.WithClock(clock), floodgate.WithMaxKeys(10_000))
	defer limiter.Close()

	ctx := context.Background()
	limit := floodgate.PerSecond(2).WithBurst(3)
	for i := 1; i <= 4; i++ {
		d, err := limiter.AllowN(ctx, "user:42", limit, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d: allowed=%v remaining=%d retry-after=%s\n", i, d.Allowed, d.Remaining, d.RetryAfter)
	}
	clock.Advance(500 * time.Millisecond)
	d, err := limiter.AllowN(ctx, "user:42", limit, 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("after 500ms: allowed=%v\n", d.Allowed)
	// Output:
	// request 1: allowed=true remaining=2 retry-after=0s
	// request 2: allowed=true remaining=1 retry-after=0s
	// request 3: allowed=true remaining=0 retry-after=0s
	// request 4: allowed=false remaining=0 retry-after=500ms
	// after 500ms: allowed=true
}
