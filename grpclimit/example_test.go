package grpclimit_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/client"
	"github.com/floodgate-io/floodgate/grpclimit"
)

// Two calls a minute per tenant, named by the x-tenant metadata field. The
// interceptor is called directly here, as grpc.NewServer's chain would
// (grpc.ChainUnaryInterceptor(unary)): the third call of tenant acme fails
// with ResourceExhausted and says when to retry; tenant globex has its own
// budget.
func ExampleUnaryServerInterceptor() {
	clock := floodgate.NewManualClock(time.Unix(1_700_000_000, 0))
	limiter := floodgate.NewMemory(floodgate.WithClock(clock))
	unary, err := grpclimit.UnaryServerInterceptor(limiter, grpclimit.Options{
		Rules: []grpclimit.Rule{
			{Name: "tenant", Limit: floodgate.PerMinute(2), Key: grpclimit.ByMetadata("x-tenant")},
		},
	})
	if err != nil {
		panic(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/shop.Orders/Create"}
	handler := func(ctx context.Context, req any) (any, error) { return "created", nil }

	for _, tenant := range []string{"acme", "acme", "acme", "globex"} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", tenant))
		resp, err := unary(ctx, nil, info, handler)
		if err != nil {
			st := status.Convert(err)
			retry := "?"
			for _, d := range st.Details() {
				if ri, ok := d.(*errdetails.RetryInfo); ok {
					retry = ri.GetRetryDelay().AsDuration().String()
				}
			}
			fmt.Printf("%s: %s, retry in %s\n", tenant, st.Code(), retry)
			continue
		}
		fmt.Printf("%s: %v\n", tenant, resp)
	}
	// Output:
	// acme: created
	// acme: created
	// acme: ResourceExhausted, retry in 30s
	// globex: created
}

// A client that retries the read-only methods of a service when the server
// refuses them with RESOURCE_EXHAUSTED or UNAVAILABLE, waiting what the
// server asks (at most 10 s here), within the default retry budget and
// throttle.
func ExampleUnaryClientInterceptor() {
	readOnly := func(fullMethod string) bool {
		return strings.HasPrefix(fullMethod, "/shop.Catalog/Get") || strings.HasPrefix(fullMethod, "/shop.Catalog/List")
	}
	opts := []grpclimit.ClientOption{
		grpclimit.RetryMethods(readOnly),
		grpclimit.RetryOptions(client.WithMaxRetries(2), client.WithMaxWait(10*time.Second)),
	}
	if err := grpclimit.ValidateClient(opts...); err != nil {
		panic(err)
	}
	conn, err := grpc.NewClient("catalog.internal:443",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(grpclimit.UnaryClientInterceptor(opts...)),
		grpc.WithChainStreamInterceptor(grpclimit.StreamClientInterceptor(opts...)))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	fmt.Println(conn.Target())
	// Output: catalog.internal:443
}
