package adaptive_test

import (
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate/adaptive"
)

// An Algorithm on its own: feed it finished requests, read the limit.
// A Limiter does this for you; this shows what the AIMD limit does with
// a success and with a burst of drops.
func ExampleNewAIMD() {
	aimd, err := adaptive.NewAIMD(adaptive.AIMDOptions{InitialLimit: 10, Timeout: time.Second})
	if err != nil {
		panic(err)
	}
	now := time.Unix(1_700_000_000, 0)
	for range 11 { // a round trip of successes with the limit in use: +1
		now = now.Add(10 * time.Millisecond)
		aimd.Update(adaptive.Sample{RTT: 50 * time.Millisecond, InFlight: 10, At: now})
	}
	fmt.Println("after a round trip of successes:", aimd.Limit())
	for range 5 { // five drops of one burst: one decrease
		aimd.Update(adaptive.Sample{RTT: 2 * time.Second, InFlight: 11, Dropped: true, At: now})
	}
	fmt.Println("after a burst of drops:", aimd.Limit())
	// Output:
	// after a round trip of successes: 11
	// after a burst of drops: 9
}
