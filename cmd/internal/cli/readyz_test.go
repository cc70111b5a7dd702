package cli

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// TestServeReadinessWhileRedisHangs: with fail_closed limits and Redis
// hung (SIGSTOP) under load, /readyz and grpc.health.v1 report not ready
// from the first time they do until Redis is back, through every probe the
// breaker sends meanwhile; after Redis resumes, they report ready again
// once a probe has found it.
func TestServeReadinessWhileRedisHangs(t *testing.T) {
	redis := testkit.StartServer(t)
	httpAddr, grpcAddr, _ := startServe(t, "--redis", redis.Addr(), "--failure-mode", "fail_closed")
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	ready := func() (httpReady, grpcReady bool) {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
		defer cancel()
		h, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode == http.StatusOK, h.GetStatus() == healthpb.HealthCheckResponse_SERVING
	}
	if h, g := ready(); !h || !g {
		t.Fatalf("with Redis up: /readyz ready %v, gRPC serving %v", h, g)
	}

	// Load, so that the breaker opens and then probes Redis every cool-down.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		body := `{"key":"k","limit":{"algorithm":"fixed_window","rate":1000000000,"period":"1h"}}`
		for {
			select {
			case <-stop:
				return
			default:
			}
			if resp, err := http.Post("http://"+httpAddr+"/v1/allow", "application/json", strings.NewReader(body)); err == nil {
				resp.Body.Close()
			}
		}
	}()
	stopLoad := sync.OnceFunc(func() { close(stop); <-stopped })
	defer stopLoad()

	redis.Pause(t)
	waitFor(t, func() bool { h, _ := ready(); return !h }, "/readyz to report the hung Redis")
	// Eight cool-downs: as many probes, each one half-open while it waits
	// for the store timeout.
	watched := 8 * failover.DefaultCoolDown
	polls := 0
	for start := time.Now(); time.Since(start) < watched; polls++ {
		if h, g := ready(); h || g {
			t.Fatalf("poll %d, %v into the outage: /readyz ready %v, gRPC serving %v; want neither until Redis is back",
				polls, time.Since(start).Round(time.Millisecond), h, g)
		}
	}
	// No traffic from here on: an unready node gets none, so the readiness
	// checks themselves must find out that Redis is back.
	stopLoad()
	redis.Resume(t)
	waitFor(t, func() bool { h, g := ready(); return h && g }, "readiness after Redis resumed, with no traffic")
	t.Logf("not ready in all %d polls over %v of the outage", polls, watched)
}
