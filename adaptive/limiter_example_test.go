package adaptive_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate/adaptive"
)

// A Limiter in front of a backend call: wait up to 50ms for a slot, and
// release the slot with the call's outcome.
func ExampleLimiter() {
	alg, _ := adaptive.NewFixed(2)
	l, err := adaptive.NewLimiter(adaptive.LimiterOptions{
		Algorithm: alg,
		MaxQueue:  16,
		MaxWait:   50 * time.Millisecond,
		Order:     adaptive.LIFO,
	})
	if err != nil {
		panic(err)
	}
	call := func(ctx context.Context, p adaptive.Priority) error {
		tok, err := l.Acquire(ctx, p)
		if err != nil {
			return err // errors.Is(err, adaptive.ErrShed): answer 503 with adaptive.RetryAfter(err)
		}
		defer tok.Success() // or Dropped on a timeout, Ignore when the client went away
		return nil          // the backend call
	}
	fmt.Println(call(context.Background(), adaptive.Critical))

	// At the limit, sheddable requests are refused first.
	a, _ := l.TryAcquire(adaptive.Critical)
	_, ok := l.TryAcquire(adaptive.Sheddable)
	fmt.Println("sheddable admitted with one of two slots taken:", ok)
	a.Success()

	_, err = adaptive.NewLimiter(adaptive.LimiterOptions{Algorithm: alg, MaxQueue: 16})
	fmt.Println(errors.Is(err, adaptive.ErrInvalidOptions), err)
	// Output:
	// <nil>
	// sheddable admitted with one of two slots taken: false
	// true adaptive: invalid options: limiter: a queue (MaxQueue 16) needs a MaxWait
}
