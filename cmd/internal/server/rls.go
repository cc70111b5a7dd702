package server

import (
	"context"
	"math"
	"net/http"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
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

// shouldRateLimit answers an Envoy request (for /json); its errors are gRPC
// statuses.
func (s *Server) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ereq, bad := fromRLS(req, s.opts.AtomicRLS)
	r, err := s.answerRLS(ctx, ereq, bad)
	if err != nil {
		return nil, err
	}
	defer s.replies.put(r)
	return r.message(), nil
}

// answerRLS decides an Envoy request, or answers why its reading failed
// (bad); its errors are gRPC statuses.
func (s *Server) answerRLS(ctx context.Context, req engine.Request, bad error) (*reply, error) {
	if bad != nil {
		return nil, status.Error(codes.InvalidArgument, excerpt.Message(bad.Error()))
	}
	req.CountDenied = s.opts.CountDeniedHits
	resp, err := s.decide(ctx, req)
	if err != nil {
		f := classify(err)
		if f.internal {
			s.log.Error("server: ShouldRateLimit failed", "domain", req.Domain, "error", err)
		}
		return nil, status.Error(f.code, f.msg)
	}
	r := s.replies.get()
	s.buildReply(resp, r) // copies what it keeps: the response is done with
	resp.Release()
	return r, nil
}

// replyPool recycles replies. A reply is taken when a request is decided
// and given back once written: by rlsCodec.Marshal for gRPC, after its
// message for /json.
type replyPool struct{ pool sync.Pool }

func (p *replyPool) get() *reply {
	if r, _ := p.pool.Get().(*reply); r != nil {
		return r
	}
	return new(reply)
}

// put clears r, so that a pooled reply holds no answer's strings, and
// pools it.
func (p *replyPool) put(r *reply) {
	*r = reply{}
	p.pool.Put(r)
}

// Envoy's units, with the lengths Envoy's service gives them.
var unitPeriods = map[typev3.RateLimitUnit]time.Duration{
	typev3.RateLimitUnit_SECOND: time.Second,
	typev3.RateLimitUnit_MINUTE: time.Minute,
	typev3.RateLimitUnit_HOUR:   time.Hour,
	typev3.RateLimitUnit_DAY:    24 * time.Hour,
	typev3.RateLimitUnit_MONTH:  30 * 24 * time.Hour,
	typev3.RateLimitUnit_YEAR:   365 * 24 * time.Hour,
	rateLimitUnitWeek:           7 * 24 * time.Hour,
}

// rateLimitUnitWeek is WEEK, which envoy.type.v3.RateLimitUnit does not
// name but Envoy's service reads from an override as its own unit 7.
const rateLimitUnitWeek = typev3.RateLimitUnit(rlsv3.RateLimitResponse_RateLimit_WEEK)

var responseUnits = map[time.Duration]rlsv3.RateLimitResponse_RateLimit_Unit{
	time.Second:          rlsv3.RateLimitResponse_RateLimit_SECOND,
	time.Minute:          rlsv3.RateLimitResponse_RateLimit_MINUTE,
	time.Hour:            rlsv3.RateLimitResponse_RateLimit_HOUR,
	24 * time.Hour:       rlsv3.RateLimitResponse_RateLimit_DAY,
	7 * 24 * time.Hour:   rlsv3.RateLimitResponse_RateLimit_WEEK,
	30 * 24 * time.Hour:  rlsv3.RateLimitResponse_RateLimit_MONTH,
	365 * 24 * time.Hour: rlsv3.RateLimitResponse_RateLimit_YEAR,
}

// reply is the answer to a ShouldRateLimit in plain values. buildReply
// decides it once; it is then written either straight in protobuf's wire
// format for gRPC (appendReply, with no message objects) or as rlsv3
// messages for /json (message). Its buffers hold an ordinary answer.
type reply struct {
	code      rlsv3.RateLimitResponse_Code
	statuses  []replyStatus
	headers   []replyHeader
	statusBuf [4]replyStatus
	headerBuf [3]replyHeader
}

// replyStatus is a RateLimitResponse.DescriptorStatus.
type replyStatus struct {
	code rlsv3.RateLimitResponse_Code
	// limited: the descriptor has a limit, so current_limit and
	// duration_until_reset are set
	limited    bool
	name       string
	perUnit    uint32
	unit       rlsv3.RateLimitResponse_RateLimit_Unit
	remaining  uint32
	untilReset time.Duration
}

// replyHeader is a response header for Envoy to add.
type replyHeader struct{ key, value string }

// buildReply turns the engine's answer into Envoy's, in out.
func (s *Server) buildReply(resp engine.Response, out *reply) {
	out.code = rlsCode(resp.Code)
	out.statuses = out.statusBuf[:0]
	var enforcedBuf [8]floodgate.Decision // the headers' inputs, on the stack for a few limits
	var quotaBuf [8]headers.Quota
	enforced, quotas := enforcedBuf[:0], quotaBuf[:0]
	quotaDescs, quotaOver := 0, 0
	picked, least := -1, uint32(leastUnset) // the status EnvoyHeaders describe
	for _, ds := range resp.Descriptors {
		st := replyStatus{code: rlsCode(ds.Code)}
		hasQuota, over := quotaMode(ds)
		if s.opts.Modes.Quota && !ds.Unlimited { // every descriptor is a quota
			hasQuota, over = true, over || ds.Code == engine.OverLimit
		}
		if hasQuota {
			quotaDescs++
			if over {
				quotaOver++
				st.code = rlsv3.RateLimitResponse_OVER_LIMIT
			}
		}
		if ds.Unlimited {
			st.remaining = math.MaxUint32 // Envoy's service: no current_limit, all remaining
		}
		if ds.Tightest >= 0 {
			ls := ds.Limits[ds.Tightest]
			q := quotaOf(ls)
			st.limited, st.name, st.perUnit = true, ls.Rule.Name, clampU32(q.Quota)
			st.unit = responseUnits[ls.Limit.Period] // UNKNOWN unless exactly one unit
			if ls.Decision.Allowed {
				st.remaining = clampU32(ls.Decision.Remaining)
			} // else 0, as Envoy's service answers a limit it finds over, shadow or not
			st.untilReset = s.untilReset(ls)
		}
		for _, ls := range ds.Limits {
			if !isShadow(ls.Rule) {
				enforced = append(enforced, ls.Decision)
				quotas = append(quotas, quotaOf(ls))
			}
		}
		out.statuses = append(out.statuses, st)
		if s.opts.EnvoyHeaders != nil {
			picked, least = envoyHeaderPick(out.statuses, hasQuota, picked, least)
		}
	}
	if s.opts.Modes.Quota { // nothing is over but quotas
		out.code = rlsv3.RateLimitResponse_OK
	}
	if quotaDescs > 0 && quotaOver == quotaDescs {
		out.code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if s.opts.Modes.Shadow {
		out.code = rlsv3.RateLimitResponse_OK
	}
	out.headers = out.headerBuf[:0]
	if h := s.opts.EnvoyHeaders; h != nil {
		if picked >= 0 {
			out.headers = h.appendValues(out.headers, out.statuses[picked])
		}
	} else if s.opts.Headers && len(quotas) > 0 {
		out.headers = append(out.headers,
			replyHeader{headers.PolicyField, headers.PolicyValue(quotas)},
			replyHeader{headers.LimitField, headers.LimitValue(quotas)})
		if c := floodgate.Combine(enforced); out.code == rlsv3.RateLimitResponse_OVER_LIMIT && resp.Code == engine.OverLimit && c.RetryAfter > 0 {
			out.headers = append(out.headers, replyHeader{headers.RetryAfterField, headers.RetryAfter(c.RetryAfter)})
		}
	}
}

// message is r as Envoy's message.
func (r *reply) message() *rlsv3.RateLimitResponse {
	out := &rlsv3.RateLimitResponse{
		OverallCode: r.code,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(r.statuses)),
	}
	for i, st := range r.statuses {
		m := &rlsv3.RateLimitResponse_DescriptorStatus{Code: st.code, LimitRemaining: st.remaining}
		if st.limited {
			m.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{Name: st.name, RequestsPerUnit: st.perUnit, Unit: st.unit}
			m.DurationUntilReset = durationpb.New(st.untilReset)
		}
		out.Statuses[i] = m
	}
	for _, h := range r.headers {
		out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, &corev3.HeaderValue{Key: h.key, Value: h.value})
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
	if d == 0 || ls.Limit.Rate == 0 { // nothing counted, or a limit of 0, which counts nothing: the window's end by the clock, aligned to the epoch
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
