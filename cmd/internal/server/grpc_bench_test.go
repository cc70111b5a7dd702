package server_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/server"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/redisstore"
)

// grpcConn serves a server over real loopback listeners until tb ends and
// returns a client connection to its gRPC listener. The policy is the
// tests' own; its clock never moves, so a benchmark stays in one window.
func grpcConn(tb testing.TB) *grpc.ClientConn {
	tb.Helper()
	return grpcConnWith(tb, floodgate.NewMemory(floodgate.WithClock(floodgate.NewManualClock(start))), policy)
}

// grpcConnWith is grpcConn with the given store and policy YAML.
func grpcConnWith(tb testing.TB, store floodgate.Limiter, yaml string) *grpc.ClientConn {
	tb.Helper()
	srv := server.New(server.Options{
		Engine:  engine.New(servicetest.Policies(tb, yaml), engine.OneStore{Limiter: store}),
		Limiter: store,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Headers: true,
	})
	httpLn, grpcLn := servicetest.Loopback(tb), servicetest.Loopback(tb)
	servicetest.Serve(tb, func(ctx context.Context) error { return srv.Serve(ctx, httpLn, grpcLn) })
	conn, err := grpc.NewClient(grpcLn.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// BenchmarkGRPCShouldRateLimit is one ShouldRateLimit over a real gRPC
// connection on 127.0.0.1: an unlimited descriptor and an over-limit one,
// so the decision, the response and its headers are all built.
func BenchmarkGRPCShouldRateLimit(b *testing.B) {
	client := rlsv3.NewRateLimitServiceClient(grpcConn(b))
	req := rreq(rdesc("path", "/health"), rdesc("user", "bench"))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.ShouldRateLimit(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGRPCShouldRateLimitRedis is the load of scripts/bench-envoy.sh
// in one process, for profiling the service's side of it: 64 callers on one
// connection, one descriptor over 10,000 values, a fixed window no value
// reaches, counted in a real redis-server. Client and server share the
// process, so per-op figures include the client: profile with
// -cpuprofile/-memprofile and focus on the server's frames.
func BenchmarkGRPCShouldRateLimitRedis(b *testing.B) {
	rs := testkit.StartServer(b)
	// A generous timeout: a busy machine must slow the benchmark, not fail it.
	store, err := redisstore.New(redisstore.Config{Addrs: []string{rs.Addr()}, Timeout: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	const keys = 10000
	client := rlsv3.NewRateLimitServiceClient(grpcConnWith(b, store, benchPolicy))
	reqs := make([]*rlsv3.RateLimitRequest, keys)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{rdesc("user", strconv.Itoa(i))}}
	}
	var next atomic.Uint64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			resp, err := client.ShouldRateLimit(ctx, reqs[next.Add(1)%keys])
			if err != nil {
				b.Fatal(err)
			}
			if resp.OverallCode != rlsv3.RateLimitResponse_OK {
				b.Fatalf("over the limit: %v", resp)
			}
		}
	})
}

// benchPolicy is scripts/bench-envoy.sh's policy.
const benchPolicy = `
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000000}
`
