package server_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate-io/floodgate/cmd/internal/server"
	"github.com/floodgate-io/floodgate/internal/headers"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

const (
	OK        = rlsv3.RateLimitResponse_OK
	OverLimit = rlsv3.RateLimitResponse_OVER_LIMIT
)

func rdesc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func rreq(ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "api", Descriptors: ds}
}

func (h *harness) should(req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
	defer cancel()
	resp, err := h.rls.ShouldRateLimit(ctx, req)
	if err != nil {
		h.t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// step is one call and what its single descriptor's status must be.
type step struct {
	advance   time.Duration
	overall   rlsv3.RateLimitResponse_Code
	code      rlsv3.RateLimitResponse_Code
	remaining uint32
	reset     time.Duration
}

func TestGRPCDecisions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		req   func() *rlsv3.RateLimitRequest
		limit *rlsv3.RateLimitResponse_RateLimit // the current_limit of every step
		steps []step
	}{
		{
			name:  "a fixed window per minute",
			req:   func() *rlsv3.RateLimitRequest { return rreq(rdesc("user", "ann")) },
			limit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 3, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
			steps: []step{
				{0, OK, OK, 2, time.Minute},
				{10 * time.Second, OK, OK, 1, 50 * time.Second},
				{0, OK, OK, 0, 50 * time.Second},
				{0, OverLimit, OverLimit, 0, 50 * time.Second},
				{50 * time.Second, OK, OK, 2, time.Minute},
			},
		},
		{
			// Envoy's service counts in whole seconds: the window's length
			// less the whole seconds since it began.
			name:  "duration_until_reset in whole seconds, rounded up",
			req:   func() *rlsv3.RateLimitRequest { return rreq(rdesc("user", "eve")) },
			limit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 3, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
			steps: []step{
				{2500 * time.Millisecond, OK, OK, 2, 58 * time.Second},
				{499 * time.Millisecond, OK, OK, 1, 58 * time.Second},
				{time.Millisecond, OK, OK, 0, 57 * time.Second},
			},
		},
		{
			name: "request-level hits_addend",
			req: func() *rlsv3.RateLimitRequest {
				r := rreq(rdesc("user", "bob"))
				r.HitsAddend = 2
				return r
			},
			limit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 3, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
			steps: []step{
				{0, OK, OK, 1, time.Minute},
				{0, OverLimit, OverLimit, 0, time.Minute}, // over: 0 remaining, as Envoy's service answers
			},
		},
		{
			name: "per-descriptor hits_addend overrides the request's",
			req: func() *rlsv3.RateLimitRequest {
				d := rdesc("user", "cat")
				d.HitsAddend = wrapperspb.UInt64(3)
				r := rreq(d)
				r.HitsAddend = 1
				return r
			},
			limit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 3, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
			steps: []step{
				{0, OK, OK, 0, time.Minute},
				{0, OverLimit, OverLimit, 0, time.Minute},
			},
		},
		{
			name: "a limit override, counted as a fixed window",
			req: func() *rlsv3.RateLimitRequest {
				d := rdesc("anything", "x")
				d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
				return rreq(d)
			},
			limit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 1, Unit: rlsv3.RateLimitResponse_RateLimit_HOUR},
			steps: []step{
				{0, OK, OK, 0, time.Hour},
				{0, OverLimit, OverLimit, 0, time.Hour},
			},
		},
		{
			name: "an override with a unit multiplier has no single unit",
			req: func() *rlsv3.RateLimitRequest {
				d := rdesc("anything", "y")
				d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(5)}
				return rreq(d)
			},
			limit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 2, Unit: rlsv3.RateLimitResponse_RateLimit_UNKNOWN},
			steps: []step{
				{0, OK, OK, 1, 5 * time.Minute},
				{0, OK, OK, 0, 5 * time.Minute},
				{0, OverLimit, OverLimit, 0, 5 * time.Minute},
			},
		},
		{
			name:  "a free period reports no unit and keeps its name",
			req:   func() *rlsv3.RateLimitRequest { return rreq(rdesc("hourly", "z")) },
			limit: &rlsv3.RateLimitResponse_RateLimit{Name: "hourly", RequestsPerUnit: 10, Unit: rlsv3.RateLimitResponse_RateLimit_UNKNOWN},
			steps: []step{{0, OK, OK, 9, 2 * time.Hour}},
		},
		{
			name:  "shadow mode never denies",
			req:   func() *rlsv3.RateLimitRequest { return rreq(rdesc("beta", "x")) },
			limit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 1, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
			steps: []step{
				{0, OK, OK, 0, time.Minute},
				{0, OK, OK, 0, time.Minute},
				{0, OK, OK, 0, time.Minute},
			},
		},
		{
			name:  "requests_per_unit 0 denies every request",
			req:   func() *rlsv3.RateLimitRequest { return rreq(rdesc("path", "/blocked")) },
			limit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 0, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND},
			steps: []step{
				{0, OverLimit, OverLimit, 0, time.Second},
				{time.Hour, OverLimit, OverLimit, 0, time.Second},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, setup{})
			for i, s := range tc.steps {
				h.clock.Advance(s.advance)
				resp := h.should(tc.req())
				if resp.OverallCode != s.overall || len(resp.Statuses) != 1 {
					t.Fatalf("step %d: %v", i, resp)
				}
				st := resp.Statuses[0]
				if st.Code != s.code || st.LimitRemaining != s.remaining || st.DurationUntilReset.AsDuration() != s.reset {
					t.Fatalf("step %d: code %v remaining %d reset %v, want %v %d %v",
						i, st.Code, st.LimitRemaining, st.DurationUntilReset.AsDuration(), s.code, s.remaining, s.reset)
				}
				cl := st.CurrentLimit
				if cl.GetName() != tc.limit.Name || cl.GetRequestsPerUnit() != tc.limit.RequestsPerUnit || cl.GetUnit() != tc.limit.Unit {
					t.Fatalf("step %d: current_limit %v, want %v", i, cl, tc.limit)
				}
			}
		})
	}
}

// A descriptor's own hits_addend of 0 reads without counting; with
// is_negative_hits its hits are given back (a request that reserved more
// than it used), never beyond the full quota, and it is never over the
// limit.
func TestGRPCZeroAndNegativeHits(t *testing.T) {
	h := newHarness(t, setup{})
	with := func(hits uint64, negative bool) *rlsv3.RateLimitRequest {
		d := rdesc("user", "dan")
		d.HitsAddend, d.IsNegativeHits = wrapperspb.UInt64(hits), negative
		return rreq(d)
	}
	for i, s := range []struct {
		req       *rlsv3.RateLimitRequest
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
	}{
		{with(0, false), OK, 3},
		{with(3, false), OK, 0},
		{with(0, false), OK, 0},
		{with(1, false), OverLimit, 0},
		{with(2, true), OK, 2},
		{with(1, false), OK, 1},
		{with(9, true), OK, 3},         // back to full, not beyond
		{with(4, false), OverLimit, 0}, // more than the quota: over, and 0 remaining as Envoy's service answers
	} {
		resp := h.should(s.req)
		if st := resp.Statuses[0]; resp.OverallCode != s.code || st.Code != s.code || st.LimitRemaining != s.remaining {
			t.Fatalf("step %d: %v, want %v with %d remaining", i, resp, s.code, s.remaining)
		}
	}
}

// An unlimited descriptor and one nothing applies to are both OK without a
// current_limit or a duration_until_reset; as in envoyproxy/ratelimit
// (src/service/ratelimit.go), the unlimited one has limit_remaining
// 4294967295, the other 0.
func TestGRPCUnlimitedAndUnknown(t *testing.T) {
	h := newHarness(t, setup{})
	for _, tc := range []struct {
		name      string
		req       *rlsv3.RateLimitRequest
		remaining uint32
	}{
		{"unlimited", rreq(rdesc("path", "/health")), math.MaxUint32},
		{"no descriptor", rreq(rdesc("nothing", "here")), 0},
		{"unknown domain", &rlsv3.RateLimitRequest{Domain: "elsewhere", Descriptors: []*ratelimitv3.RateLimitDescriptor{rdesc("user", "ann")}}, 0},
	} {
		for range 5 {
			resp := h.should(tc.req)
			st := resp.Statuses[0]
			if resp.OverallCode != OK || st.Code != OK || st.CurrentLimit != nil || st.DurationUntilReset != nil ||
				st.LimitRemaining != tc.remaining || len(resp.ResponseHeadersToAdd) != 0 {
				t.Fatalf("%s: %v, want OK with limit_remaining %d and nothing else", tc.name, resp, tc.remaining)
			}
		}
	}
}

// quota_mode as envoyproxy/ratelimit has it (src/service/ratelimit.go): a
// descriptor over its quota reports OVER_LIMIT, and the request is over
// the limit only when every descriptor with a quota is, whatever the
// others say.
func TestGRPCQuotaMode(t *testing.T) {
	h := newHarness(t, setup{policy: `domain: api
descriptors:
  - key: quota
    value: a
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota
    value: b
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: quota
    value: shadow
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`})
	codes := func(resp *rlsv3.RateLimitResponse) string {
		s := resp.OverallCode.String() + ":"
		for _, st := range resp.Statuses {
			s += " " + st.Code.String()
		}
		return s
	}
	for i, tc := range []struct {
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{rreq(rdesc("quota", "a"), rdesc("quota", "b")), "OK: OK OK"},
		{rreq(rdesc("quota", "a"), rdesc("quota", "b")), "OK: OVER_LIMIT OK"}, // b still has quota
		{rreq(rdesc("quota", "a"), rdesc("quota", "b")), "OVER_LIMIT: OVER_LIMIT OVER_LIMIT"},
		{rreq(rdesc("user", "u"), rdesc("quota", "a")), "OVER_LIMIT: OK OVER_LIMIT"}, // the only quota is over
		{rreq(rdesc("user", "u")), "OK: OK"},
		{rreq(rdesc("quota", "shadow"), rdesc("quota", "shadow")), "OK: OK OK"}, // shadow_mode wins over quota_mode
	} {
		if got := codes(h.should(tc.req)); got != tc.want {
			t.Errorf("step %d: %s, want %s", i, got, tc.want)
		}
	}
}

func TestGRPCTightestOfSeveralLimits(t *testing.T) {
	h := newHarness(t, setup{})
	req := rreq(rdesc("tenant", "acme"))
	// burst: token bucket 2/s with a burst of 4; sustained: 5 a minute.
	resp := h.should(req)
	if cl := resp.Statuses[0].CurrentLimit; cl.GetName() != "burst" || cl.GetRequestsPerUnit() != 4 || resp.Statuses[0].LimitRemaining != 3 {
		t.Fatalf("first: %v", resp.Statuses[0])
	}
	for range 3 {
		h.should(req)
	}
	h.clock.Advance(time.Second) // the bucket has 2 again; sustained 1
	resp = h.should(req)
	if cl := resp.Statuses[0].CurrentLimit; resp.OverallCode != OK || cl.GetName() != "sustained" || resp.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("after a second: %v", resp)
	}
	resp = h.should(req)
	if resp.OverallCode != OverLimit || resp.Statuses[0].CurrentLimit.GetName() != "sustained" {
		t.Fatalf("sustained exhausted: %v", resp)
	}
}

func TestGRPCDescriptorsIndependentOrAtomic(t *testing.T) {
	for _, atomic := range []bool{false, true} {
		t.Run(fmt.Sprint("atomic=", atomic), func(t *testing.T) {
			h := newHarness(t, setup{opts: func(o *server.Options) { o.AtomicRLS = atomic }})
			resp := h.should(rreq(rdesc("user", "ann"), rdesc("path", "/blocked")))
			if resp.OverallCode != OverLimit || resp.Statuses[0].Code != OK || resp.Statuses[1].Code != OverLimit {
				t.Fatalf("%v", resp)
			}
			want := uint32(1) // Envoy's semantics: ann's request counted
			if atomic {
				want = 2 // nothing consumed
			}
			if got := h.should(rreq(rdesc("user", "ann"))).Statuses[0].LimitRemaining; got != want {
				t.Fatalf("ann has %d left, want %d", got, want)
			}
		})
	}
}

// The RateLimit fields in response_headers_to_add parse as Structured
// Fields and carry the numbers of the limits; Retry-After is honest.
func TestGRPCResponseHeaders(t *testing.T) {
	h := newHarness(t, setup{})
	h.clock.Advance(15 * time.Second)
	req := rreq(rdesc("user", "ann"), rdesc("tenant", "acme"), rdesc("beta", "b"))
	resp := h.should(req)
	got := map[string]string{}
	for _, hv := range resp.ResponseHeadersToAdd {
		got[hv.Key] = hv.Value
	}
	policy, err := headers.ParseList(got["RateLimit-Policy"])
	if err != nil {
		t.Fatalf("RateLimit-Policy %q: %v", got["RateLimit-Policy"], err)
	}
	limit, err := headers.ParseList(got["RateLimit"])
	if err != nil {
		t.Fatalf("RateLimit %q: %v", got["RateLimit"], err)
	}
	// The shadow limit is not advertised.
	want := []struct {
		name       string
		q, w, r, t int64
	}{
		{"api.user", 3, 60, 2, 45},
		{"burst", 4, 2, 3, 1}, // 4 tokens earned back in 2s at 2/s; full again in 0.5s
		{"sustained", 5, 60, 4, 45},
	}
	if len(policy) != len(want) || len(limit) != len(want) {
		t.Fatalf("policy %q, limit %q", got["RateLimit-Policy"], got["RateLimit"])
	}
	for i, w := range want {
		checkItem(t, policy[i], w.name, "q", w.q, "w", w.w)
		checkItem(t, limit[i], w.name, "r", w.r, "t", w.t)
	}
	if _, ok := got["Retry-After"]; ok {
		t.Fatal("Retry-After on an allowed request")
	}

	for range 2 {
		h.should(rreq(rdesc("user", "ann")))
	}
	resp = h.should(rreq(rdesc("user", "ann")))
	if resp.OverallCode != OverLimit {
		t.Fatalf("%v", resp)
	}
	var retry string
	for _, hv := range resp.ResponseHeadersToAdd {
		if hv.Key == "Retry-After" {
			retry = hv.Value
		}
	}
	if retry != "45" {
		t.Fatalf("Retry-After %q, want 45", retry)
	}
	h.clock.Advance(44 * time.Second)
	if h.should(rreq(rdesc("user", "ann"))).OverallCode != OverLimit {
		t.Fatal("passed before Retry-After")
	}
	h.clock.Advance(time.Second)
	if h.should(rreq(rdesc("user", "ann"))).OverallCode != OK {
		t.Fatal("denied after Retry-After")
	}
}

func checkItem(t *testing.T, it headers.Item, name string, kv ...any) {
	t.Helper()
	if it.Value != name {
		t.Errorf("item %v: name %v, want %s", it, it.Value, name)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if v, ok := it.Param(kv[i].(string)); !ok || v != kv[i+1] {
			t.Errorf("item %q: %s=%v, want %v", name, kv[i], v, kv[i+1])
		}
	}
}

func TestGRPCHeadersOff(t *testing.T) {
	h := newHarness(t, setup{opts: func(o *server.Options) { o.Headers = false }})
	if resp := h.should(rreq(rdesc("user", "ann"))); len(resp.ResponseHeadersToAdd) != 0 {
		t.Fatalf("%v", resp.ResponseHeadersToAdd)
	}
}

func TestGRPCBadInput(t *testing.T) {
	h := newHarness(t, setup{})
	many := rreq()
	for range 65 {
		many.Descriptors = append(many.Descriptors, rdesc("user", "x"))
	}
	deep := rdesc()
	for range 33 {
		deep.Entries = append(deep.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
	}
	with := func(f func(d *ratelimitv3.RateLimitDescriptor)) *rlsv3.RateLimitRequest {
		d := rdesc("user", "x")
		f(d)
		return rreq(d)
	}
	for _, tc := range []struct {
		name, want string
		req        *rlsv3.RateLimitRequest
	}{
		{"empty domain", "domain is empty", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{rdesc("user", "x")}}},
		{"no descriptors", "descriptors is empty", rreq()},
		{"too many descriptors", "65 descriptors, at most 64", many},
		{"too deep", "33 entries, at most 32", rreq(deep)},
		{"no entries", "descriptors[0]: no entries", rreq(rdesc())},
		{"empty key", "descriptors[1]: entries[0]: key is empty", rreq(rdesc("user", "x"), rdesc("", "x"))},
		{"hits too large", "hits_addend 9999999999999 above the maximum", with(func(d *ratelimitv3.RateLimitDescriptor) { d.HitsAddend = wrapperspb.UInt64(9999999999999) })},
		{"override without unit", "limit override: unit UNKNOWN", with(func(d *ratelimitv3.RateLimitDescriptor) {
			d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}
		})},
		{"override multiplier 0", "unit_multiplier must be above 0", with(func(d *ratelimitv3.RateLimitDescriptor) {
			d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_SECOND, UnitMultiplier: wrapperspb.UInt32(0)}
		})},
		{"override multiplier overflows", "unit_multiplier 4000000000 is too large", with(func(d *ratelimitv3.RateLimitDescriptor) {
			d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_YEAR, UnitMultiplier: wrapperspb.UInt32(4e9)}
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.rls.ShouldRateLimit(context.Background(), tc.req)
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v %q, want InvalidArgument naming %q", st.Code(), st.Message(), tc.want)
			}
		})
	}
}

// Envoy's service reports duration_until_reset as the time to the end of
// the fixed window whatever was counted in it: also for a read of a key
// nothing has counted yet, for a request larger than the whole quota,
// where the store has nothing to reset, and for an override of 0.
func TestGRPCResetOfAnEmptyWindow(t *testing.T) {
	h := newHarness(t, setup{})
	h.clock.Advance(21*time.Second + 300*time.Millisecond) // 21.3 s into the minute
	for _, tc := range []struct {
		name     string
		hits     uint64
		code     rlsv3.RateLimitResponse_Code
		override *ratelimitv3.RateLimitDescriptor_RateLimitOverride
	}{
		{"a read of a fresh key", 0, OK, nil},
		{"more than the quota", 9, OverLimit, nil},
		{"an override of 0, which denies", 1, OverLimit, &ratelimitv3.RateLimitDescriptor_RateLimitOverride{Unit: typev3.RateLimitUnit_MINUTE}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := rdesc("user", "erin-"+tc.name)
			d.HitsAddend = wrapperspb.UInt64(tc.hits)
			d.Limit = tc.override
			st := h.should(rreq(d)).Statuses[0]
			if st.Code != tc.code || st.GetDurationUntilReset().AsDuration() != 39*time.Second {
				t.Fatalf("%v reset after %v, want %v and 39s (the minute's end, in whole seconds)", st.Code, st.GetDurationUntilReset().AsDuration(), tc.code)
			}
		})
	}
}

// With CountDeniedHits the Envoy surfaces count what a limit denies, as
// Envoy's service does: after a denial a smaller request in the same window
// is denied too, where Floodgate alone would admit it.
func TestGRPCCountDeniedHits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		count bool
		want  []rlsv3.RateLimitResponse_Code // hits 2, 2, 1, then a read
	}{
		{"Floodgate's own: a denial takes nothing", false, []rlsv3.RateLimitResponse_Code{OK, OverLimit, OK, OK}},
		{"as Envoy's service: a denial counts", true, []rlsv3.RateLimitResponse_Code{OK, OverLimit, OverLimit, OverLimit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, setup{opts: func(o *server.Options) { o.CountDeniedHits = tc.count }})
			for i, hits := range []uint64{2, 2, 1, 0} {
				d := rdesc("user", "fay")
				d.HitsAddend = wrapperspb.UInt64(hits)
				if got := h.should(rreq(d)).Statuses[0].Code; got != tc.want[i] {
					t.Fatalf("request %d (hits %d): %v, want %v", i, hits, got, tc.want[i])
				}
			}
		})
	}
}
