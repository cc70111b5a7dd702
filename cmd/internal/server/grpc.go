package server

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// rlsServiceName is the full name of Envoy's rate limit service.
var rlsServiceName = rlsv3.RateLimitService_ServiceDesc.ServiceName

// streamWorkers is how many goroutines serve gRPC streams and are kept
// between them. A goroutine per stream (grpc-go's default) starts with a
// small stack that a decision's depth grows, copying it, on every request:
// a tenth of the server's CPU under load. Kept workers keep their grown
// stacks. Streams beyond them (more callers in flight than workers) get a
// goroutine of their own, as without workers.
const streamWorkers = 256

func (s *Server) newGRPC() *grpc.Server {
	g := grpc.NewServer(append(append(s.opts.Listen.GRPCOptions(), s.obs.GRPCOptions()...),
		grpc.MaxRecvMsgSize(int(min(s.opts.MaxBodyBytes, 1<<30))),
		grpc.ChainUnaryInterceptor(s.recoverUnary),
		grpc.ChainStreamInterceptor(s.recoverStream),
		grpc.NumStreamWorkers(streamWorkers),
		grpc.ForceServerCodecV2(newRLSCodec(&s.replies)),
	)...)
	registerRLS(g, s)
	healthpb.RegisterHealthServer(g, s.health)
	reflection.Register(g)
	return g
}

func (s *Server) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("server: panic serving gRPC", "method", info.FullMethod, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			resp, err = nil, status.Error(codes.Internal, "internal error")
		}
	}()
	return handler(ctx, req)
}

func (s *Server) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("server: panic serving gRPC", "method", info.FullMethod, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = status.Error(codes.Internal, "internal error")
		}
	}()
	return handler(srv, ss)
}

// healthServer is grpc.health.v1 for "" (the whole server) and Envoy's
// rate limit service, serving while Server.ready says so.
type healthServer struct {
	healthpb.UnimplementedHealthServer
	s    *Server
	poll time.Duration // how often Watch asks Ready
}

func (h *healthServer) status(service string) (healthpb.HealthCheckResponse_ServingStatus, bool) {
	if service != "" && service != rlsServiceName {
		return healthpb.HealthCheckResponse_SERVICE_UNKNOWN, false
	}
	if h.s.ready() != nil {
		return healthpb.HealthCheckResponse_NOT_SERVING, true
	}
	return healthpb.HealthCheckResponse_SERVING, true
}

// Check implements HealthServer.
func (h *healthServer) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	st, ok := h.status(req.GetService())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "unknown service %q", req.GetService())
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

// List implements HealthServer.
func (h *healthServer) List(context.Context, *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	out := &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{}}
	for _, name := range []string{"", rlsServiceName} {
		st, _ := h.status(name)
		out.Statuses[name] = &healthpb.HealthCheckResponse{Status: st}
	}
	return out, nil
}

// Watch implements HealthServer: the status now, then each change. It
// returns when the server shuts down (after sending NOT_SERVING), so that a
// graceful stop does not wait for watchers.
func (h *healthServer) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	t := time.NewTicker(h.poll)
	defer t.Stop()
	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	for {
		st, _ := h.status(req.GetService())
		if st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		select {
		case <-h.s.stopping:
			if last != healthpb.HealthCheckResponse_NOT_SERVING && last != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
				stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING})
			}
			return nil
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-t.C:
		}
	}
}
