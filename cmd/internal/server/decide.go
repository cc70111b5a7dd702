package server

import (
	"context"
	"errors"
	"net"
	"net/http"

	"google.golang.org/grpc/codes"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/internal/excerpt"
	"github.com/floodgate-io/floodgate/observe"
)

// ExplicitPolicy is the policy explicit limits (POST /v1/allow with a key
// and a limit) are reported under; their limit is the algorithm's name.
const ExplicitPolicy = "_explicit"

// decide runs a policy lookup; the engine reports it to the observers.
func (s *Server) decide(ctx context.Context, req engine.Request) (engine.Response, error) {
	return s.engine.Decide(ctx, req)
}

// allowExplicit decides an explicit limit and reports it to the observers.
func (s *Server) allowExplicit(ctx context.Context, client, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	reqs := []floodgate.Request{{Key: ExplicitPrefix + key, Limit: limit, Cost: cost}}
	var rep observe.Reporting
	ctx = rep.Start(ctx, s.observer, observe.Decided{
		Surface: observe.SurfaceServe, Policy: ExplicitPolicy, Client: client, Requests: reqs, Limiter: s.opts.Limiter})
	d, err := s.opts.Limiter.AllowN(ctx, reqs[0].Key, limit, cost)
	rep.Decided()
	if err != nil && engine.IsBadInput(err) {
		rep.Malformed(err)
		return d, err
	}
	rep.Report([]floodgate.Decision{d}, err, func(int) string { return string(limit.Algorithm) })
	return d, err
}

// clientOf is the host of r's peer, reported as the decision's client (the
// Envoy surfaces report none: their caller is Envoy, and the client is in
// the descriptors).
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	return host
}

// isShadow reports whether a rule reports without denying.
func isShadow(r policy.Rule) bool { return r.ShadowMode || r.QuotaMode }

// failure is how a surface reports an error from a decision.
type failure struct {
	status int
	code   codes.Code
	msg    string
	// internal errors are logged; the caller sees a generic message
	internal bool
}

// classify maps an error of the engine or a store to what the surfaces answer.
func classify(err error) failure {
	switch {
	case engine.IsBadInput(err):
		return failure{http.StatusBadRequest, codes.InvalidArgument, excerpt.Message(err.Error()), false}
	case errors.Is(err, engine.ErrUnsupported):
		return failure{http.StatusNotImplemented, codes.Unimplemented, excerpt.Message(err.Error()), false}
	case errors.Is(err, floodgate.ErrStoreUnavailable):
		return failure{http.StatusServiceUnavailable, codes.Unavailable, "store unavailable", true}
	case errors.Is(err, context.DeadlineExceeded):
		return failure{http.StatusGatewayTimeout, codes.DeadlineExceeded, "deadline exceeded", false}
	case errors.Is(err, context.Canceled):
		return failure{http.StatusServiceUnavailable, codes.Canceled, "request canceled", false}
	}
	return failure{http.StatusInternalServerError, codes.Internal, "internal error", true}
}
