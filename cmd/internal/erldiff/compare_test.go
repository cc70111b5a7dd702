package erldiff

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// resetTolerance is how far the two services' duration_until_reset (and
// reset header) may differ. envoyproxy/ratelimit counts in whole seconds
// of its clock (unit - now%unit, so 1s..unit); the two answers are also
// taken a few milliseconds apart. Both are within a second of the true
// time left; two seconds covers both roundings.
const resetTolerance = 2 * time.Second

// outcome is one service's answer to one request.
type outcome struct {
	resp *rlsv3.RateLimitResponse
	err  error
}

func (o outcome) String() string {
	if o.err != nil {
		s, _ := status.FromError(o.err)
		return fmt.Sprintf("error %s: %s", s.Code(), s.Message())
	}
	return compact(o.resp)
}

func compact(m proto.Message) string {
	return protojson.MarshalOptions{}.Format(m)
}

// difference is one field on which the services' answers disagree.
type difference struct {
	field     string // e.g. statuses[1].limit_remaining
	erl, fg   string
	situation string // what envoyproxy/ratelimit saw for the descriptor, for grouping
	tolerate  string // the deliberate difference that covers it, if any
}

// cause is the field without its indices and the situation it arose in:
// what the summary groups by.
func (d difference) cause() string {
	c := indexes.ReplaceAllString(d.field, "[]")
	if d.situation != "" {
		c += " (" + d.situation + ")"
	}
	return c
}

var indexes = regexp.MustCompile(`\[\d+\]`)

// deliberate is a difference Floodgate makes on purpose: the comparison
// tolerates it and the summary counts it. Everything not listed fails.
type deliberate struct {
	name, reason string
	applies      func(req *rlsv3.RateLimitRequest, erl, fg outcome) bool
}

// deliberates is the whole list; docs/envoy-ratelimit.md repeats it.
var deliberates = []deliberate{
	{
		name: "invalid request: InvalidArgument, not Unknown",
		reason: "a request without a domain or without descriptors is the caller's mistake; Floodgate answers gRPC " +
			"InvalidArgument naming the problem, envoyproxy/ratelimit Unknown (its panic-and-recover path). " +
			"Envoy treats both as an error of the rate limit service (failure_mode_deny decides).",
		applies: func(req *rlsv3.RateLimitRequest, erl, fg outcome) bool {
			invalid := req.GetDomain() == "" || len(req.GetDescriptors()) == 0
			return invalid && status.Code(erl.err) == codes.Unknown && status.Code(fg.err) == codes.InvalidArgument
		},
	},
}

// compare lists every field on which the answers differ, marking those a
// deliberate difference covers.
func compare(req *rlsv3.RateLimitRequest, erl, fg outcome, headers bool) []difference {
	diffs := compareOutcomes(req, erl, fg, headers)
	if len(diffs) == 0 {
		return nil
	}
	for _, d := range deliberates {
		if d.applies(req, erl, fg) {
			for i := range diffs {
				diffs[i].tolerate = d.name
			}
			break
		}
	}
	return diffs
}

func compareOutcomes(req *rlsv3.RateLimitRequest, erl, fg outcome, headers bool) []difference {
	switch {
	case erl.err != nil || fg.err != nil:
		if status.Code(erl.err) == status.Code(fg.err) {
			return nil
		}
		return []difference{{field: "grpc_code", erl: codeOf(erl), fg: codeOf(fg)}}
	}
	var out []difference
	add := func(field string, e, f any) {
		if es, fs := fmt.Sprint(e), fmt.Sprint(f); es != fs {
			out = append(out, difference{field: field, erl: es, fg: fs})
		}
	}
	add("overall_code", erl.resp.GetOverallCode(), fg.resp.GetOverallCode())
	es, fs := erl.resp.GetStatuses(), fg.resp.GetStatuses()
	add("len(statuses)", len(es), len(fs))
	for i := range min(len(es), len(fs)) {
		sit := situation(hitsOf(req, i), es[i])
		for _, d := range compareStatus(fmt.Sprintf("statuses[%d].", i), es[i], fs[i]) {
			d.situation = sit
			out = append(out, d)
		}
	}
	if headers {
		out = append(out, compareHeaders("response_headers_to_add", erl.resp.GetResponseHeadersToAdd(), fg.resp.GetResponseHeadersToAdd())...)
	}
	add("len(request_headers_to_add)", len(erl.resp.GetRequestHeadersToAdd()), len(fg.resp.GetRequestHeadersToAdd()))
	return out
}

// hitsOf is what descriptor i adds, by envoyproxy/ratelimit's rule: its
// own hits_addend if set (0 included), else the request's, 0 taken as 1.
func hitsOf(req *rlsv3.RateLimitRequest, i int) uint64 {
	if h := req.GetDescriptors()[i].GetHitsAddend(); h != nil {
		return h.GetValue()
	}
	return max(1, uint64(req.GetHitsAddend()))
}

// situation names the case envoyproxy/ratelimit's answer shows for one
// descriptor, so that the summary tells causes apart.
func situation(hits uint64, e *rlsv3.RateLimitResponse_DescriptorStatus) string {
	switch {
	case e.GetCurrentLimit() == nil && e.GetLimitRemaining() == math.MaxUint32:
		return "unlimited"
	case e.GetCurrentLimit() == nil:
		return "no limit"
	case hits == 0:
		return "hits_addend 0"
	case e.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
		return "envoyproxy/ratelimit over the limit"
	case e.GetLimitRemaining() == 0:
		return "envoyproxy/ratelimit at or over the limit, answered OK (shadow_mode or exactly full)"
	case hits > uint64(e.GetCurrentLimit().GetRequestsPerUnit()):
		return "hits above requests_per_unit"
	}
	return "under the limit"
}

func codeOf(o outcome) string {
	if o.err == nil {
		return "OK (answered)"
	}
	return status.Code(o.err).String()
}

func compareStatus(prefix string, e, f *rlsv3.RateLimitResponse_DescriptorStatus) []difference {
	var out []difference
	add := func(field string, ev, fv any) {
		if es, fs := fmt.Sprint(ev), fmt.Sprint(fv); es != fs {
			out = append(out, difference{field: prefix + field, erl: es, fg: fs})
		}
	}
	add("code", e.GetCode(), f.GetCode())
	el, fl := e.GetCurrentLimit(), f.GetCurrentLimit()
	if (el == nil) != (fl == nil) {
		add("current_limit", limitString(el), limitString(fl))
	} else if el != nil {
		add("current_limit.requests_per_unit", el.GetRequestsPerUnit(), fl.GetRequestsPerUnit())
		add("current_limit.unit", el.GetUnit(), fl.GetUnit())
		add("current_limit.name", strconv.Quote(el.GetName()), strconv.Quote(fl.GetName()))
	}
	add("limit_remaining", e.GetLimitRemaining(), f.GetLimitRemaining())
	ed, fd := e.GetDurationUntilReset(), f.GetDurationUntilReset()
	switch {
	case (ed == nil) != (fd == nil):
		add("duration_until_reset", durationString(ed.AsDuration(), ed != nil), durationString(fd.AsDuration(), fd != nil))
	case ed != nil && (ed.AsDuration()-fd.AsDuration()).Abs() > resetTolerance:
		add("duration_until_reset", ed.AsDuration(), fd.AsDuration())
	}
	return out
}

func limitString(l *rlsv3.RateLimitResponse_RateLimit) string {
	if l == nil {
		return "none"
	}
	return compact(l)
}

func durationString(d time.Duration, set bool) string {
	if !set {
		return "none"
	}
	return d.String()
}

// compareHeaders compares headers by name (case-insensitively), reset
// headers (seconds) within resetTolerance.
func compareHeaders(field string, e, f []*corev3.HeaderValue) []difference {
	em, fm := headerMap(e), headerMap(f)
	var names []string
	for n := range em {
		names = append(names, n)
	}
	for n := range fm {
		if _, ok := em[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []difference
	for _, n := range names {
		ev, eok := em[n]
		fv, fok := fm[n]
		if ev == fv && eok == fok || strings.Contains(n, "reset") && secondsClose(ev, fv) {
			continue
		}
		out = append(out, difference{field: field + "[" + n + "]", erl: headerValue(ev, eok), fg: headerValue(fv, fok)})
	}
	return out
}

func headerMap(hs []*corev3.HeaderValue) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[strings.ToLower(h.GetKey())] = h.GetValue()
	}
	return m
}

func headerValue(v string, ok bool) string {
	if !ok {
		return "absent"
	}
	return strconv.Quote(v)
}

func secondsClose(a, b string) bool {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	return errA == nil && errB == nil && time.Duration(x-y).Abs()*time.Second <= resetTolerance
}
