package serviceclient

import (
	"reflect"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

// An HTTP answer teaches the limits its RateLimit-Policy field states for
// the descriptor's enforced limits, in order; a descriptor whose limits
// the fields do not state exactly is not learned, and one without limits
// is learned as not limited.
func TestLearnHTTP(t *testing.T) {
	perUser := limitAnswer{Name: "per-user", Limit: 3}
	cases := []struct {
		name          string
		limits        []limitAnswer
		limit, policy string
		want          []floodgate.Limit
		known         bool
	}{
		{"stated", []limitAnswer{perUser}, `"per-user";r=2;t=60`, `"per-user";q=3;w=60`,
			[]floodgate.Limit{{Algorithm: floodgate.TokenBucket, Rate: 3, Period: time.Minute, Burst: 3}}, true},
		{"shadow limits are not enforced", []limitAnswer{{Name: "shadow", Shadow: true}, perUser}, `"per-user";r=2`, `"per-user";q=3;w=60`,
			[]floodgate.Limit{{Algorithm: floodgate.TokenBucket, Rate: 3, Period: time.Minute, Burst: 3}}, true},
		{"not limited", nil, "", "", nil, true},
		{"another limit's field", []limitAnswer{perUser}, `"other";r=2`, `"other";q=3;w=60`, nil, false},
		{"no window", []limitAnswer{perUser}, `"per-user";r=2`, "", nil, false},
		{"no fields", []limitAnswer{perUser}, "", "", nil, false},
		{"malformed fields", []limitAnswer{perUser}, `"per-user";r=`, `"per-user";q=3;w=60`, nil, false},
	}
	for _, tc := range cases {
		l := newLearned(8)
		d := Descriptor{Entries: []Entry{{Key: "user", Value: "a"}}}
		l.learnHTTP("shop", []Descriptor{d}, allowAnswer{Descriptors: []descriptorAnswer{{Code: "OK", Limits: tc.limits}},
			rateLimit: tc.limit, rateLimitPolicy: tc.policy})
		got, known := l.get(policyKey("shop", d))
		if known != tc.known || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: learned %v (known %v), want %v (known %v)", tc.name, got, known, tc.want, tc.known)
		}
	}
}

// The table of learned limits is bounded: a descriptor that hashes to a
// taken slot replaces what it held, which is then unknown again.
func TestLearnedIsBounded(t *testing.T) {
	l := newLearned(1)
	l.put("a", []floodgate.Limit{floodgate.PerMinute(1)})
	l.put("b", nil)
	if _, known := l.get("a"); known {
		t.Error("a is still known in a table of one slot after b")
	}
	if _, known := l.get("b"); !known {
		t.Error("b is unknown right after it was learned")
	}
	if _, known := (*learned)(nil).get("b"); known {
		t.Error("a nil table knows b")
	}
}
