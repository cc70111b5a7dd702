package server_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/metrics"
	"github.com/floodgate-io/floodgate/cmd/internal/server"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
)

// grpcConn serves a server over real loopback listeners until tb ends and
// returns a client connection to its gRPC listener. The policy is the
// tests' own; its clock never moves, so a benchmark stays in one window.
func grpcConn(tb testing.TB) *grpc.ClientConn {
	tb.Helper()
	mem := floodgate.NewMemory(floodgate.WithClock(floodgate.NewManualClock(start)))
	srv := server.New(server.Options{
		Engine:  engine.New(servicetest.Policies(tb, policy), engine.OneStore{Limiter: mem}),
		Limiter: mem,
		Metrics: metrics.New(prometheus.NewRegistry()),
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
