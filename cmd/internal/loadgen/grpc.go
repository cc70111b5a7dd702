package loadgen

import (
	"context"
	"fmt"
	"strconv"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// userAgent identifies the load in the service's logs.
const userAgent = "floodgate-bench"

type grpcTransport struct {
	p     plan
	conns []*grpc.ClientConn
}

// newGRPC opens Conns client connections and waits, up to Timeout, for each
// to be ready, so that the first calls are not charged the TCP and HTTP/2
// handshakes. A connection that fails is not an error here: its calls will
// fail and be counted, as with HTTP.
func newGRPC(ctx context.Context, p plan) (*grpcTransport, error) {
	t := &grpcTransport{p: p}
	for range p.Conns {
		// Plaintext: the benchmark targets a service on a trusted network,
		// normally loopback or a sidecar, as Envoy's RLS client does.
		cc, err := grpc.NewClient(p.Addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithUserAgent(userAgent))
		if err != nil {
			t.close()
			return nil, fmt.Errorf("loadgen: gRPC client for %s: %w", p.Addr, err)
		}
		t.conns = append(t.conns, cc)
		cc.Connect()
	}
	wctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	for _, cc := range t.conns {
		for s := cc.GetState(); s != connectivity.Ready && s != connectivity.TransientFailure && s != connectivity.Shutdown; s = cc.GetState() {
			if !cc.WaitForStateChange(wctx, s) {
				break
			}
		}
	}
	return t, nil
}

func (t *grpcTransport) client(worker int) client {
	entry := &ratelimitv3.RateLimitDescriptor_Entry{Key: t.p.DescriptorKey}
	return &grpcClient{
		rls: rlsv3.NewRateLimitServiceClient(t.conns[worker%len(t.conns)]),
		// One request per worker, its value rewritten per call: Invoke
		// marshals it before returning, so reuse is safe and saves
		// building the message tree each time.
		req: &rlsv3.RateLimitRequest{
			Domain:      t.p.Domain,
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry}}},
			HitsAddend:  uint32(t.p.Cost),
		},
		entry:   entry,
		timeout: t.p.Timeout,
	}
}

func (t *grpcTransport) close() {
	for _, cc := range t.conns {
		cc.Close()
	}
}

type grpcClient struct {
	rls     rlsv3.RateLimitServiceClient
	req     *rlsv3.RateLimitRequest
	entry   *ratelimitv3.RateLimitDescriptor_Entry
	timeout time.Duration
}

func (c *grpcClient) call(ctx context.Context, key int) (bool, error) {
	c.entry.Value = strconv.Itoa(key)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	resp, err := c.rls.ShouldRateLimit(ctx, c.req)
	cancel()
	if err != nil {
		return false, err
	}
	switch code := resp.GetOverallCode(); code {
	case rlsv3.RateLimitResponse_OK:
		return true, nil
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		return false, nil
	default:
		return false, fmt.Errorf("ShouldRateLimit answered overall_code %s", code)
	}
}
