package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/metrics"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/internal/excerpt"
)

// decide runs a policy lookup and records it in the metrics.
func (s *Server) decide(ctx context.Context, req engine.Request) (engine.Response, error) {
	start := time.Now()
	resp, err := s.engine.Decide(ctx, req)
	took := time.Since(start)
	domain := metrics.DomainLabel(s.engine.Policies(), req.Domain)
	if err != nil {
		s.recordError(domain, err, took)
		return resp, err
	}
	recorded := false
	for i, ds := range resp.Descriptors {
		desc := policy.Descriptor{Entries: req.Descriptors[i].Entries}
		for _, ls := range ds.Limits {
			result := metrics.Allowed
			switch {
			case isShadow(ls.Rule) && !ls.Decision.Allowed:
				result = metrics.ShadowDenied
			case !ls.Decision.Allowed:
				result = metrics.Denied
			}
			s.metrics.Decision(domain, s.metrics.LimitLabel(ls.Rule, desc), result, latencyOnce(&recorded, took))
		}
	}
	if !recorded {
		s.metrics.Decision(domain, metrics.None, metrics.Allowed, latencyOnce(&recorded, took))
	}
	return resp, nil
}

// allowExplicit decides an explicit limit and records it in the metrics.
func (s *Server) allowExplicit(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	start := time.Now()
	d, err := s.opts.Limiter.AllowN(ctx, ExplicitPrefix+key, limit, cost)
	took := time.Since(start)
	if err != nil {
		s.recordError(metrics.Explicit, err, took)
		return d, err
	}
	result := metrics.Allowed
	if !d.Allowed {
		result = metrics.Denied
	}
	s.metrics.Decision(metrics.Explicit, string(limit.Algorithm), result, max(took, 1))
	return d, nil
}

// recordError records a failed decision; the caller's bad input is not a
// decision and is not recorded.
func (s *Server) recordError(domain string, err error, took time.Duration) {
	if engine.IsBadInput(err) {
		return
	}
	s.metrics.Decision(domain, metrics.None, metrics.Error, max(took, 1))
	switch {
	case errors.Is(err, floodgate.ErrStoreUnavailable):
		s.metrics.StoreError("unavailable")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
	default:
		s.metrics.StoreError("other")
	}
}

// latencyOnce returns took the first time, 0 after: the histogram counts
// each request once.
func latencyOnce(done *bool, took time.Duration) time.Duration {
	if *done {
		return 0
	}
	*done = true
	return max(took, 1)
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
