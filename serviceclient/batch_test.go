package serviceclient_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate-io/floodgate/internal/testkit/timing"
	"github.com/floodgate-io/floodgate/serviceclient"
)

// countRPCs dials addr with an interceptor that counts the RPCs sent.
func countRPCs(t *testing.T, addr string) (*grpc.ClientConn, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			n.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, &n
}

// N concurrent policy decisions of one domain go as one ShouldRateLimit
// when the batch holds N descriptors, and each gets the answer it would
// have had alone: the service decides descriptors on their own.
func TestBatchGathersConcurrentDecisionsIntoOneCall(t *testing.T) {
	srv := startServe(t)
	const n = 12
	conn, rpcs := countRPCs(t, srv.GRPC)
	// MaxWait is only a bound against a hang: the batch leaves when full.
	c := newClient(t, serviceclient.Options{GRPC: conn, CacheSize: -1,
		Batch: &serviceclient.Batch{MaxDescriptors: n, MaxWait: timing.Patience}})
	// Users 0..5 have used their 3 already: their answer is over the limit.
	alone := newClient(t, serviceclient.Options{GRPCAddr: srv.GRPC, CacheSize: -1})
	for i := range n / 2 {
		for range 3 {
			if _, err := alone.Decide(patient(t), "shop", user(fmt.Sprint("u", i)), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	results := make([]serviceclient.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = c.Decide(patient(t), "shop", user(fmt.Sprint("u", i)), 1) })
	}
	wg.Wait()
	if got := rpcs.Load(); got != 1 {
		t.Errorf("%d calls to the service for %d decisions, want 1", got, n)
	}
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("decision %d: %v", i, errs[i])
		}
		used := i < n/2
		want := serviceclient.DescriptorResult{Allowed: !used, Limited: true, Name: "per-user", Limit: 3, Remaining: 2}
		if used {
			want.Remaining = 0
		}
		d := r.Descriptors[0]
		d.ResetAfter = 0
		if r.Allowed != !used || len(r.Descriptors) != 1 || d != want {
			t.Errorf("decision %d (user u%d): %+v, want %+v", i, i, r, want)
		}
	}
}
