package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
)

// A worker that must stay under 100 calls per second waits for its turn
// instead of being refused; a wait that cannot end before the deadline,
// and a cost the limit can never admit, fail at once.
func ExampleWait() {
	limiter := floodgate.NewMemory()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	limit := floodgate.PerSecond(100).WithBurst(1) // one call every 10ms
	for i := 1; i <= 3; i++ {
		d, err := floodgate.Wait(ctx, limiter, "worker", limit, 1)
		fmt.Printf("call %d: allowed=%v err=%v\n", i, d.Allowed, err)
	}

	_, err := floodgate.Wait(ctx, limiter, "worker", limit, 2) // above the burst
	fmt.Println("cost 2:", errors.Is(err, floodgate.ErrNeverPasses))

	hourly := floodgate.PerHour(1)
	_, _ = limiter.AllowN(ctx, "report", hourly, 1) // the hour's one unit is gone
	_, err = floodgate.Wait(ctx, limiter, "report", hourly, 1)
	fmt.Println("next report within 10s:", errors.Is(err, context.DeadlineExceeded))
	// Output:
	// call 1: allowed=true err=<nil>
	// call 2: allowed=true err=<nil>
	// call 3: allowed=true err=<nil>
	// cost 2: true
	// next report within 10s: true
}
