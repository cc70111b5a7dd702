package server

import (
	"context"
	"fmt"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/floodgate-io/floodgate/internal/excerpt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// A malformed RateLimitRequest is the caller's fault, so it is answered
// InvalidArgument. grpc-go cannot say so by itself: it turns every error of
// the codec into codes.Internal ("failed to unmarshal the received
// message"). So ShouldRateLimit is registered with a service description of
// its own whose handler receives the request in a rlsRequest, which keeps
// the decoding error instead of returning it to grpc-go, and answers that
// error itself. Everything else (interceptors, health, reflection, the
// codec) is grpc-go's own: no server option is involved.

// registerRLS registers srv as Envoy's rate limit service on g.
func registerRLS(g grpc.ServiceRegistrar, srv rlsv3.RateLimitServiceServer) {
	h := &rlsHandler{srv: srv, info: grpc.UnaryServerInfo{Server: srv, FullMethod: rlsv3.RateLimitService_ShouldRateLimit_FullMethodName}}
	h.next = h.shouldRateLimit
	g.RegisterService(&grpc.ServiceDesc{
		ServiceName: rlsServiceName,
		HandlerType: (*rlsv3.RateLimitServiceServer)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: h.handle}},
		Metadata:    "envoy/service/ratelimit/v3/rls.proto",
	}, srv)
}

// rlsHandler is the generated handler of ShouldRateLimit but for the
// decoding. What the generated one builds on each call (the interceptors'
// info and next handler) it builds once.
type rlsHandler struct {
	srv  rlsv3.RateLimitServiceServer
	info grpc.UnaryServerInfo
	next grpc.UnaryHandler // shouldRateLimit
}

// handle decodes the request and passes it through the interceptors. A
// request that does not decode is InvalidArgument, before the
// interceptors, as a request grpc-go cannot read is.
func (h *rlsHandler) handle(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(rlsRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if in.err != nil {
		return nil, status.Error(codes.InvalidArgument, excerpt.Message(in.err.Error()))
	}
	if interceptor == nil {
		return h.srv.ShouldRateLimit(ctx, &in.req)
	}
	return interceptor(ctx, &in.req, &h.info, h.next)
}

func (h *rlsHandler) shouldRateLimit(ctx context.Context, req any) (any, error) {
	return h.srv.ShouldRateLimit(ctx, req.(*rlsv3.RateLimitRequest))
}

// rlsRequest is what gRPC's proto codec decodes a ShouldRateLimit request
// into. It implements only the v1 message API (Reset, String,
// ProtoMessage) and a legacy Unmarshal method, which protobuf-go calls for
// such messages (as it does for gogo/protobuf's): the codec hands it the
// request's bytes and it keeps whatever went wrong in err. proto's errors
// name the problem (and the field, for invalid UTF-8) without quoting the
// input.
type rlsRequest struct {
	req rlsv3.RateLimitRequest
	err error // why req did not decode; nil when it did
}

// Unmarshal decodes b into r.req; it never fails, so that grpc-go does not
// make the failure an Internal error.
func (r *rlsRequest) Unmarshal(b []byte) error {
	if err := proto.Unmarshal(b, &r.req); err != nil {
		r.err = fmt.Errorf("malformed RateLimitRequest (%d bytes): %w", len(b), err)
	}
	return nil
}

// Reset implements the v1 message API.
func (r *rlsRequest) Reset() {
	r.req.Reset()
	r.err = nil
}

// String implements the v1 message API.
func (r *rlsRequest) String() string { return r.req.String() }

// ProtoMessage implements the v1 message API.
func (*rlsRequest) ProtoMessage() {}
