package server

import (
	"context"
	"sync"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// ShouldRateLimit is registered with a service description of its own,
// whose handler reads the request into an rlsCall (see rlsCodec) and
// answers a reply, not rlsv3's messages. A malformed request is the
// caller's fault, so it is answered InvalidArgument: the codec keeps the
// decoding error in the rlsCall instead of returning it to grpc-go, which
// would make it Internal ("failed to unmarshal the received message").
// Everything else (interceptors, health, reflection) is grpc-go's own.

// registerRLS registers s as Envoy's rate limit service on g.
func registerRLS(g grpc.ServiceRegistrar, s *Server) {
	srv := rlsService{s: s}
	h := &rlsHandler{s: s, info: grpc.UnaryServerInfo{Server: srv, FullMethod: rlsv3.RateLimitService_ShouldRateLimit_FullMethodName}}
	h.next = h.shouldRateLimit
	g.RegisterService(&grpc.ServiceDesc{
		ServiceName: rlsServiceName,
		HandlerType: (*rlsv3.RateLimitServiceServer)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: h.handle}},
		Metadata:    "envoy/service/ratelimit/v3/rls.proto",
	}, srv)
}

// rlsHandler is the generated handler of ShouldRateLimit but for the
// messages. What the generated one builds on each call (the interceptors'
// info and next handler) it builds once.
type rlsHandler struct {
	s    *Server
	info grpc.UnaryServerInfo
	next grpc.UnaryHandler // shouldRateLimit
	// calls are rlsCalls to read requests into. A call is done with its
	// rlsCall when the handler returns: the engine's request points into
	// it, but nothing of the request outlives the decision except its
	// strings, which are cut from a string of their own (rlsCall.decode).
	calls sync.Pool
}

// handle reads the request and passes it through the interceptors, as an
// *rlsCall.
func (h *rlsHandler) handle(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in, _ := h.calls.Get().(*rlsCall)
	if in == nil {
		in = new(rlsCall)
	}
	defer h.release(in)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return h.shouldRateLimit(ctx, in)
	}
	return interceptor(ctx, in, &h.info, h.next)
}

// release clears c, so that a pooled call holds no request's strings, and
// pools it.
func (h *rlsHandler) release(c *rlsCall) {
	*c = rlsCall{}
	h.calls.Put(c)
}

func (h *rlsHandler) shouldRateLimit(ctx context.Context, req any) (any, error) {
	ereq, bad := req.(*rlsCall).request(h.s.opts.AtomicRLS)
	r, err := h.s.answerRLS(ctx, ereq, bad)
	if err != nil {
		return nil, err
	}
	return r, nil
}
