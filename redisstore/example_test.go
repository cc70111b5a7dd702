package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/redisstore"
)

// A store shared by every replica of a service: each decision is one Lua
// script call in Redis, so the replicas together admit at most the limit.
// It needs a Redis server, so it is compiled but not run.
func Example() {
	limiter, err := redisstore.New(redisstore.Config{
		Addrs:     []string{"127.0.0.1:6379"},
		KeyPrefix: "myservice:",
		Timeout:   50 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	d, err := limiter.AllowN(context.Background(), "tenant:acme", floodgate.PerMinute(600), 1)
	if err != nil {
		// The store could not answer (errors.Is(err, floodgate.ErrStoreUnavailable)):
		// the failover package decides what such requests get.
		log.Fatal(err)
	}
	fmt.Println(d.Allowed, d.Remaining)
}
