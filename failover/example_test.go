package failover_test

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
)

// downStore stands in for a Redis store that cannot be reached.
type downStore struct{}

func (downStore) AllowN(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
	return floodgate.Decision{}, fmt.Errorf("dial tcp 127.0.0.7:6379: connection refused: %w", floodgate.ErrStoreUnavailable)
}

// Four nodes share a limit of 100 requests per second. While the store is
// down each node enforces its quarter in memory.
func Example() {
	limiter, err := failover.New(downStore{}, failover.Config{
		Mode:    failover.FailLocal,
		Nodes:   4,
		Timeout: 50 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	limit := floodgate.PerSecond(100)
	allowed := 0
	for range 40 {
		d, err := limiter.AllowN(context.Background(), "tenant:acme", limit, 1)
		if err != nil {
			panic(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	fmt.Println("allowed:", allowed)
	fmt.Println("degraded:", limiter.Stats().Degraded)
	fmt.Println("breaker:", limiter.State())
	// Output:
	// allowed: 25
	// degraded: 40
	// breaker: open
}
