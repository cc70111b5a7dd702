package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/redisstore"
)

type callerKey struct{}

// seeing is a rueidis.Client that records the callerKey value of the
// context of each command it is given: what an instrumented client (a
// tracer) would see of its caller.
type seeing struct {
	rueidis.Client
	mu   sync.Mutex
	seen []any
}

func (s *seeing) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	s.mu.Lock()
	s.seen = append(s.seen, ctx.Value(callerKey{}))
	s.mu.Unlock()
	return s.Client.Do(ctx, cmd)
}

// Config.WrapClient wraps the client New connects, and the commands a
// decision sends carry its caller's context values (a span to nest in).
func TestWrapClientSeesTheCallersContext(t *testing.T) {
	srv := testkit.StartServer(t)
	var wrapped *seeing
	for _, c := range []struct {
		name     string
		maxBatch int
	}{{"batched", 0}, {"one request a call", 1}} {
		t.Run(c.name, func(t *testing.T) {
			l := newLimiter(t, redisstore.Config{
				Addrs: []string{srv.Addr()}, Timeout: 5 * time.Second, MaxBatch: c.maxBatch,
				WrapClient: func(c rueidis.Client) rueidis.Client {
					wrapped = &seeing{Client: c}
					return wrapped
				},
			})
			if wrapped == nil || l.Client() != rueidis.Client(wrapped) {
				t.Fatal("New did not apply WrapClient to its client")
			}
			callerCtx := context.WithValue(context.Background(), callerKey{}, "request 1")
			if _, err := l.AllowN(callerCtx, "k", floodgate.PerSecond(10), 1); err != nil {
				t.Fatal(err)
			}
			wrapped.mu.Lock()
			defer wrapped.mu.Unlock()
			if len(wrapped.seen) == 0 {
				t.Fatal("no command went through the wrapped client")
			}
			for i, v := range wrapped.seen {
				if v != "request 1" {
					t.Errorf("command %d saw the caller's value %v, want %q", i, v, "request 1")
				}
			}
		})
	}
}
