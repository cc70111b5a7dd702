package server

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/internal/excerpt"
	"github.com/floodgate-io/floodgate/internal/headers"
)

// rlsService implements envoy.service.ratelimit.v3.RateLimitService.
type rlsService struct {
	rlsv3.UnimplementedRateLimitServiceServer
	s *Server
}

// ShouldRateLimit implements RateLimitServiceServer.
func (r rlsService) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return r.s.shouldRateLimit(ctx, req)
}

// shouldRateLimit answers an Envoy request; its errors are gRPC statuses.
func (s *Server) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ereq, err := fromRLS(req, s.opts.AtomicRLS)
	ereq.CountDenied = s.opts.CountDeniedHits
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, excerpt.Message(err.Error()))
	}
	resp, err := s.decide(ctx, ereq)
	if err != nil {
		f := classify(err)
		if f.internal {
			s.log.Error("server: ShouldRateLimit failed", "domain", req.GetDomain(), "error", err)
		}
		return nil, status.Error(f.code, f.msg)
	}
	return s.toRLS(resp), nil
}

// Envoy's units, with the lengths Envoy's service gives them.
var unitPeriods = map[typev3.RateLimitUnit]time.Duration{
	typev3.RateLimitUnit_SECOND: time.Second,
	typev3.RateLimitUnit_MINUTE: time.Minute,
	typev3.RateLimitUnit_HOUR:   time.Hour,
	typev3.RateLimitUnit_DAY:    24 * time.Hour,
	typev3.RateLimitUnit_MONTH:  30 * 24 * time.Hour,
	typev3.RateLimitUnit_YEAR:   365 * 24 * time.Hour,
}

var responseUnits = map[time.Duration]rlsv3.RateLimitResponse_RateLimit_Unit{
	time.Second:          rlsv3.RateLimitResponse_RateLimit_SECOND,
	time.Minute:          rlsv3.RateLimitResponse_RateLimit_MINUTE,
	time.Hour:            rlsv3.RateLimitResponse_RateLimit_HOUR,
	24 * time.Hour:       rlsv3.RateLimitResponse_RateLimit_DAY,
	7 * 24 * time.Hour:   rlsv3.RateLimitResponse_RateLimit_WEEK,
	30 * 24 * time.Hour:  rlsv3.RateLimitResponse_RateLimit_MONTH,
	365 * 24 * time.Hour: rlsv3.RateLimitResponse_RateLimit_YEAR,
}

// fromRLS validates an Envoy request and turns it into an engine request.
// Its errors name the problem. hits_addend is the cost the limits that
// count units take; those that count requests take 1 per descriptor (0
// for a hits_addend of 0, a read), and is_negative_hits gives back units
// only: the request happened.
func fromRLS(req *rlsv3.RateLimitRequest, atomic bool) (engine.Request, error) {
	switch {
	case req.GetDomain() == "":
		return engine.Request{}, fmt.Errorf("domain is empty")
	case len(req.GetDomain()) > floodgate.MaxValueBytes:
		return engine.Request{}, floodgate.CheckLength("domain", req.GetDomain(), floodgate.MaxValueBytes)
	case len(req.GetDescriptors()) == 0:
		return engine.Request{}, fmt.Errorf("descriptors is empty: give at least one")
	case len(req.GetDescriptors()) > engine.MaxDescriptors:
		return engine.Request{}, fmt.Errorf("%d descriptors, at most %d", len(req.GetDescriptors()), engine.MaxDescriptors)
	}
	out := engine.Request{Domain: req.GetDomain(), Hits: int64(req.GetHitsAddend()), Atomic: atomic,
		Descriptors: make([]engine.Descriptor, len(req.GetDescriptors()))}
	for i, d := range req.GetDescriptors() {
		ed, err := fromRLSDescriptor(d)
		if err != nil {
			return engine.Request{}, fmt.Errorf("descriptors[%d]: %w", i, err)
		}
		out.Descriptors[i] = ed
	}
	return out, nil
}

func fromRLSDescriptor(d *ratelimitv3.RateLimitDescriptor) (engine.Descriptor, error) {
	var out engine.Descriptor
	switch n := len(d.GetEntries()); {
	case n == 0:
		return out, fmt.Errorf("no entries")
	case n > engine.MaxEntries:
		return out, fmt.Errorf("%d entries, at most %d (too deep)", n, engine.MaxEntries)
	}
	out.Refund = d.GetIsNegativeHits()
	out.Entries = make([]policy.Entry, len(d.GetEntries()))
	for j, e := range d.GetEntries() {
		if e.GetKey() == "" {
			return out, fmt.Errorf("entries[%d]: key is empty", j)
		}
		out.Entries[j] = policy.Entry{Key: e.GetKey(), Value: e.GetValue()}
		if err := engine.CheckEntry(out.Entries[j]); err != nil {
			return out, fmt.Errorf("entries[%d]: %w", j, err)
		}
	}
	if h := d.GetHitsAddend(); h != nil {
		if h.GetValue() > engine.MaxHits {
			return out, fmt.Errorf("hits_addend %d above the maximum %d", h.GetValue(), int64(engine.MaxHits))
		}
		out.Hits, out.HitsSet = int64(h.GetValue()), true
	}
	if o := d.GetLimit(); o != nil {
		limit, err := fromOverride(o)
		if err != nil {
			return out, fmt.Errorf("limit override: %w", err)
		}
		out.Override = &limit
	}
	return out, nil
}

// fromOverride turns Envoy's per-descriptor limit into a fixed window, as
// Envoy's service counts it.
func fromOverride(o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) (floodgate.Limit, error) {
	unit, ok := unitPeriods[o.GetUnit()]
	if !ok {
		return floodgate.Limit{}, fmt.Errorf("unit %s: want SECOND, MINUTE, HOUR, DAY, MONTH or YEAR", o.GetUnit())
	}
	if o.GetRequestsPerUnit() == 0 {
		return floodgate.Limit{}, fmt.Errorf("requests_per_unit must be above 0")
	}
	period := unit
	if m := o.GetUnitMultiplier(); m != nil {
		if m.GetValue() == 0 {
			return floodgate.Limit{}, fmt.Errorf("unit_multiplier must be above 0")
		}
		if int64(m.GetValue()) > int64(math.MaxInt64/unit) {
			return floodgate.Limit{}, fmt.Errorf("unit_multiplier %d is too large", m.GetValue())
		}
		period *= time.Duration(m.GetValue())
	}
	return floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: int64(o.GetRequestsPerUnit()), Period: period}, nil
}

// toRLS turns the engine's answer into Envoy's.
func (s *Server) toRLS(resp engine.Response) *rlsv3.RateLimitResponse {
	out := &rlsv3.RateLimitResponse{
		OverallCode: rlsCode(resp.Code),
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(resp.Descriptors)),
	}
	var enforced []floodgate.Decision
	var quotas []headers.Quota
	quotaDescs, quotaOver := 0, 0
	var picked *rlsv3.RateLimitResponse_DescriptorStatus // the one EnvoyHeaders describe
	least := uint32(leastUnset)
	for i, ds := range resp.Descriptors {
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsCode(ds.Code)}
		hasQuota, over := quotaMode(ds)
		if hasQuota {
			quotaDescs++
			if over {
				quotaOver++
				st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			}
		}
		if ds.Unlimited {
			st.LimitRemaining = math.MaxUint32 // Envoy's service: no current_limit, all remaining
		}
		if ds.Tightest >= 0 {
			ls := ds.Limits[ds.Tightest]
			q := quotaOf(ls)
			st.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{
				Name:            ls.Rule.Name,
				RequestsPerUnit: clampU32(q.Quota),
				Unit:            responseUnits[ls.Limit.Period], // UNKNOWN unless exactly one unit
			}
			if ls.Decision.Allowed {
				st.LimitRemaining = clampU32(ls.Decision.Remaining)
			} // else 0, as Envoy's service answers a limit it finds over, shadow or not
			st.DurationUntilReset = durationpb.New(s.untilReset(ls))
		}
		for _, ls := range ds.Limits {
			if !isShadow(ls.Rule) {
				enforced = append(enforced, ls.Decision)
				quotas = append(quotas, quotaOf(ls))
			}
		}
		if s.opts.EnvoyHeaders != nil {
			picked, least = envoyHeaderPick(st, hasQuota, picked, least)
		}
		out.Statuses[i] = st
	}
	if quotaDescs > 0 && quotaOver == quotaDescs {
		out.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if h := s.opts.EnvoyHeaders; h != nil {
		if picked != nil {
			out.ResponseHeadersToAdd = h.values(picked)
		}
	} else if s.opts.Headers && len(quotas) > 0 {
		out.ResponseHeadersToAdd = []*corev3.HeaderValue{
			{Key: headers.PolicyField, Value: headers.PolicyValue(quotas)},
			{Key: headers.LimitField, Value: headers.LimitValue(quotas)},
		}
		if c := floodgate.Combine(enforced); resp.Code == engine.OverLimit && c.RetryAfter > 0 {
			out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd,
				&corev3.HeaderValue{Key: headers.RetryAfterField, Value: headers.RetryAfter(c.RetryAfter)})
		}
	}
	return out
}

// quotaMode reports whether a descriptor has a quota_mode limit, and
// whether one of them is over. As in Envoy's service, such a descriptor
// reports OVER_LIMIT, and the request is over the limit only when every
// descriptor with a quota is: the caller may fall through to another quota.
func quotaMode(ds engine.DescriptorStatus) (has, over bool) {
	for _, ls := range ds.Limits {
		if ls.Rule.QuotaMode {
			has = true
			// shadow_mode wins: Envoy's service answers a shadow limit OK
			// before it looks at quotas
			over = over || (!ls.Decision.Allowed && ls.Decision.RetryAfter != 0 && !ls.Rule.ShadowMode)
		}
	}
	return has, over
}

// untilReset is a limit's duration_until_reset. A fixed window of whole
// seconds reports what Envoy's service does: the time to the end of the
// current window in whole seconds (the window's length less the seconds
// since it began), whatever has been counted in it, so also for a read and
// for a window nothing has been counted in yet (where the store's
// ResetAfter is 0). Other limits report the store's own figure.
func (s *Server) untilReset(ls engine.LimitStatus) time.Duration {
	d := max(ls.Decision.ResetAfter, 0)
	p := ls.Limit.Period
	if ls.Limit.Algorithm != floodgate.FixedWindow || p%time.Second != 0 {
		return d
	}
	if d == 0 { // nothing counted: the window's end by the clock, aligned to the epoch
		d = p - time.Duration(s.now().UnixNano()%int64(p))
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

func (s *Server) now() time.Time {
	if s.opts.Clock != nil {
		return s.opts.Clock.Now()
	}
	return time.Now()
}

func rlsCode(c engine.Code) rlsv3.RateLimitResponse_Code {
	if c == engine.OverLimit {
		return rlsv3.RateLimitResponse_OVER_LIMIT
	}
	return rlsv3.RateLimitResponse_OK
}

func clampU32(n int64) uint32 { return uint32(min(max(n, 0), math.MaxUint32)) }

// handleJSON is Envoy's service's /json: a RateLimitRequest in protojson,
// the RateLimitResponse in protojson, 429 when over the limit.
func (s *Server) handleJSON(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req rlsv3.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "malformed RateLimitRequest: "+err.Error())
		return
	}
	resp, err := s.shouldRateLimit(r.Context(), &req)
	if err != nil {
		st := status.Convert(err)
		writeError(w, httpStatus(st.Code()), st.Message())
		return
	}
	b, err := protojson.Marshal(resp)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, h := range resp.GetResponseHeadersToAdd() {
		w.Header().Set(h.GetKey(), h.GetValue())
	}
	code := http.StatusOK
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		code = http.StatusTooManyRequests
	}
	writeRaw(w, code, b)
}

func httpStatus(c codes.Code) int {
	switch c {
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.Unavailable, codes.Canceled:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.Unimplemented:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}
