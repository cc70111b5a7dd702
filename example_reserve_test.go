package floodgate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
)

// A shaper of 10 sends per second reserves each send's place in its queue:
// the reservation says how long to hold the send, and a send that is called
// off gives its place back, so the next one moves up.
func ExampleMemory_Reserve() {
	clock := floodgate.NewManualClock(time.Unix(1_700_000_000, 0))
	limiter := floodgate.NewMemory(floodgate.WithClock(clock))
	ctx := context.Background()
	limit := floodgate.Limit{Algorithm: floodgate.LeakyBucket, Rate: 10, Period: time.Second, Burst: 5}

	var sends []*floodgate.Reservation
	for i := 1; i <= 3; i++ {
		r, err := limiter.Reserve(ctx, "smtp", limit, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("send %d: ok=%v hold %s\n", i, r.OK(), r.Delay())
		sends = append(sends, r)
	}
	sends[2].Cancel() // the third send is called off
	r, _ := limiter.Reserve(ctx, "smtp", limit, 1)
	fmt.Printf("next send: hold %s\n", r.Delay())
	// Output:
	// send 1: ok=true hold 0s
	// send 2: ok=true hold 100ms
	// send 3: ok=true hold 200ms
	// next send: hold 200ms
}
