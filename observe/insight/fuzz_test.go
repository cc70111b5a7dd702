package insight

import (
	"errors"
	"testing"
)

// FuzzParseQuery: any query string is either refused with an
// ErrInvalidQuery or gives values within their bounds.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "policy=api&by=denied&n=5", "n=0", "n=1&n=2", "since=2026-03-01T12:00:00Z", "by=x", "%zz", "n=99999999999999999999", "x=1"} {
		f.Add(s)
	}
	allowed := []string{"policy", "by", "n", "since"}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseQuery(raw, allowed, 10, 128)
		if err != nil {
			if !errors.Is(err, ErrInvalidQuery) {
				t.Fatalf("parseQuery(%q) = %v, not an ErrInvalidQuery", raw, err)
			}
			return
		}
		if q.n < 1 || q.n > 128 || (q.by != "" && q.by != ByAdmitted && q.by != ByDenied) || (q.hasPolicy && q.policy == "") {
			t.Fatalf("parseQuery(%q) = %+v: out of bounds", raw, q)
		}
	})
}
