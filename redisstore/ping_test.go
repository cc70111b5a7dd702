package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/redisstore"
)

var _ failover.Pinger = (*redisstore.Limiter)(nil)

// Ping answers while Redis does, and within the store's timeout with
// ErrStoreUnavailable while it hangs, storing nothing either way.
func TestPing(t *testing.T) {
	srv := testkit.StartServer(t)
	l, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if err := l.Ping(ctx); err != nil {
		t.Fatalf("Ping with Redis up = %v", err)
	}
	srv.Pause(t)
	err = l.Ping(ctx)
	srv.Resume(t)
	if !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("Ping with Redis paused = %v, want ErrStoreUnavailable", err)
	}
	if keys := srv.Do(t, "DBSIZE"); keys != "0" {
		t.Fatalf("Ping left %s keys", keys)
	}
}
