package erldiff

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// These tests check the comparison and the generator themselves; they run
// without envoyproxy/ratelimit.

func answer(code rlsv3.RateLimitResponse_Code, remaining uint32, reset time.Duration) outcome {
	return outcome{resp: &rlsv3.RateLimitResponse{OverallCode: code, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
		Code:               code,
		CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 5, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
		LimitRemaining:     remaining,
		DurationUntilReset: durationpb.New(reset),
	}}}}
}

func TestCompare(t *testing.T) {
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	req := &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}}
	noDomain := &rlsv3.RateLimitRequest{Descriptors: req.Descriptors}
	unknown := outcome{err: status.Error(codes.Unknown, "rate limit domain must not be empty")}
	invalid := outcome{err: status.Error(codes.InvalidArgument, "domain is empty")}
	for _, tc := range []struct {
		name      string
		req       *rlsv3.RateLimitRequest
		erl, fg   outcome
		fields    []string // the differing fields
		tolerated bool
	}{
		{name: "equal answers", req: req, erl: answer(ok, 3, 30*time.Second), fg: answer(ok, 3, 30*time.Second)},
		{name: "resets within the tolerance", req: req, erl: answer(ok, 3, 30*time.Second), fg: answer(ok, 3, 28500*time.Millisecond)},
		{name: "resets past the tolerance", req: req, erl: answer(ok, 3, 30*time.Second), fg: answer(ok, 3, 27*time.Second),
			fields: []string{"statuses[0].duration_until_reset"}},
		{name: "remaining and code", req: req, erl: answer(over, 0, 30*time.Second), fg: answer(ok, 1, 30*time.Second),
			fields: []string{"overall_code", "statuses[0].code", "statuses[0].limit_remaining"}},
		{name: "an error against an answer", req: req, erl: unknown, fg: answer(ok, 3, time.Second), fields: []string{"grpc_code"}},
		{name: "the same error code", req: noDomain, erl: invalid, fg: invalid},
		{name: "empty domain: Unknown against InvalidArgument is deliberate", req: noDomain, erl: unknown, fg: invalid,
			fields: []string{"grpc_code"}, tolerated: true},
		{name: "a valid request: Unknown against InvalidArgument is not", req: req, erl: unknown, fg: invalid,
			fields: []string{"grpc_code"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fields []string
			for _, d := range compare(tc.req, tc.erl, tc.fg, false) {
				fields = append(fields, d.field)
				if (d.tolerate != "") != tc.tolerated {
					t.Errorf("%s tolerated as %q, want tolerated %v", d.field, d.tolerate, tc.tolerated)
				}
			}
			if !reflect.DeepEqual(fields, tc.fields) {
				t.Errorf("fields %v, want %v", fields, tc.fields)
			}
		})
	}
}

func TestCompareHeaders(t *testing.T) {
	h := func(kv ...string) []*corev3.HeaderValue {
		var out []*corev3.HeaderValue
		for i := 0; i < len(kv); i += 2 {
			out = append(out, &corev3.HeaderValue{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	erl := h("RateLimit-Limit", "5", "RateLimit-Remaining", "3", "RateLimit-Reset", "30")
	for _, tc := range []struct {
		name   string
		fg     []*corev3.HeaderValue
		fields []string
	}{
		{"same, names in other case, reset a second off", h("ratelimit-limit", "5", "ratelimit-remaining", "3", "ratelimit-reset", "29"), nil},
		{"remaining differs", h("RateLimit-Limit", "5", "RateLimit-Remaining", "2", "RateLimit-Reset", "30"),
			[]string{"h[ratelimit-remaining]"}},
		{"other names", h("RateLimit", "limit=5, remaining=3, reset=30"),
			[]string{"h[ratelimit]", "h[ratelimit-limit]", "h[ratelimit-remaining]", "h[ratelimit-reset]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fields []string
			for _, d := range compareHeaders("h", erl, tc.fg) {
				fields = append(fields, d.field)
			}
			if !reflect.DeepEqual(fields, tc.fields) {
				t.Errorf("fields %v, want %v", fields, tc.fields)
			}
		})
	}
}

// TestGeneratorDrawsWhatEnvoyRatelimitAccepts checks, over many seeds, the
// rules envoyproxy/ratelimit's loader enforces (a config it refuses would
// compare nothing), and that a seed replays the same scenario.
func TestGeneratorDrawsWhatEnvoyRatelimitAccepts(t *testing.T) {
	all, err := parseFeatures("all")
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(200) {
		sc := newGenerator(seed, 3, all).scenario(3, 30)
		for _, f := range sc.files {
			checkLevel(t, f.Domain, f.Descriptors)
		}
		if again := newGenerator(seed, 3, all).scenario(3, 30); sc.yaml() != again.yaml() || len(sc.requests) != len(again.requests) {
			t.Fatalf("seed %d drew two different scenarios", seed)
		}
		units := sc.units()
		for _, r := range sc.requests {
			for _, d := range r.GetDescriptors() {
				if o := d.GetLimit(); o != nil && !slices.Contains(units, overrideUnits[o.GetUnit()]) {
					t.Fatalf("seed %d: an override's unit %v is not among the windows checked, %v", seed, o.GetUnit(), units)
				}
			}
		}
	}
}

func checkLevel(t *testing.T, where string, ds []*descriptor) {
	t.Helper()
	seen := map[string]bool{}
	for _, d := range ds {
		id := d.Key + "_" + d.Value
		if seen[id] {
			t.Errorf("%s: siblings share key and value %q", where, id)
		}
		seen[id] = true
		if rl := d.RateLimit; rl != nil {
			if rl.Unlimited && rl.Unit != "" {
				t.Errorf("%s.%s: unlimited with a unit", where, id)
			}
			for _, r := range rl.Replaces {
				if r.Name == rl.Name {
					t.Errorf("%s.%s: replaces its own name %q", where, id, r.Name)
				}
			}
		}
		if d.ShareThreshold && !strings.Contains(d.Value, "*") {
			t.Errorf("%s.%s: share_threshold without a wildcard", where, id)
		}
		checkLevel(t, where+"."+id, d.Descriptors)
	}
}

func TestParseFeatures(t *testing.T) {
	if f, err := parseFeatures("middle_wildcards, long_units"); err != nil || !f.middleWildcards || !f.longUnits || f.quotaMode {
		t.Errorf("parseFeatures: %+v, %v", f, err)
	}
	if _, err := parseFeatures("middle_wildcard"); err == nil || !strings.Contains(err.Error(), "middle_wildcard") {
		t.Errorf("a misspelt feature: err %v, want one naming it", err)
	}
}

// Windows of two units start at the same second in the first window of the
// shorter one within the longer: there envoyproxy/ratelimit counts them
// together, and the test waits or tolerates (collision).
func TestStartTogether(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	monthStart := time.Unix(30*86400*680, 0).UTC() // a window of envoyproxy/ratelimit's 30-day month begins
	for _, tc := range []struct {
		units           []string
		at              time.Time
		shorter, longer string
	}{
		{[]string{"minute", "second"}, at("2026-12-02T10:00:00.300Z"), "second", "minute"},
		{[]string{"second", "minute"}, at("2026-12-02T10:00:01.000Z"), "", ""},
		{[]string{"hour", "minute"}, at("2026-12-02T10:00:59.900Z"), "minute", "hour"},
		{[]string{"hour", "minute"}, at("2026-12-02T10:01:00.000Z"), "", ""},
		{[]string{"day", "hour", "second"}, at("2026-12-02T00:30:07Z"), "hour", "day"},
		{[]string{"month", "day"}, monthStart.Add(23 * time.Hour), "day", "month"},
		{[]string{"month", "day"}, monthStart.Add(25 * time.Hour), "", ""},
		{[]string{"second"}, at("2026-12-02T10:00:00Z"), "", ""},
	} {
		u, v, ok := startTogether(tc.units, tc.at)
		if u != tc.shorter || v != tc.longer || ok != (tc.shorter != "") {
			t.Errorf("%v at %s: %q, %q, %v; want %q, %q", tc.units, tc.at, u, v, ok, tc.shorter, tc.longer)
		}
	}
}
