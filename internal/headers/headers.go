// Package headers writes the IETF RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-10 and Retry-After:
//
//	RateLimit-Policy: "api";q=100;w=60
//	RateLimit: "api";r=0;t=17
//	Retry-After: 17
//
// Both RateLimit fields are Structured Field Lists (RFC 9651) with one item
// per quota policy: the policy's name as an sf-string, with the parameters
// q (quota) and w (window, seconds) in RateLimit-Policy, and r (remaining
// quota) and t (seconds until the quota resets) in RateLimit. Durations are
// whole seconds rounded up, so that a client that waits them is never early.
package headers

import (
	"net/http"
	"strconv"
	"time"
)

// The field names.
const (
	PolicyField     = "RateLimit-Policy"
	LimitField      = "RateLimit"
	RetryAfterField = "Retry-After"
)

// maxInteger is the largest sf-integer (15 decimal digits).
const maxInteger = 999_999_999_999_999

// Quota is one quota policy and its state, as the two fields report it.
type Quota struct {
	Name      string        // the policy's identifier
	Quota     int64         // q: units allowed per Window
	Window    time.Duration // w: the policy's time window
	Remaining int64         // r: units that could still pass now
	Reset     time.Duration // t: until the quota is back to full
}

// Policy renders one RateLimit-Policy item: `"name";q=100;w=60`, w in whole
// seconds, rounded up and at least 1.
func Policy(name string, quota int64, window time.Duration) string {
	return string(appendPolicy(nil, name, quota, window))
}

// Limit renders one RateLimit item: `"name";r=0;t=17`, t in whole seconds,
// rounded up.
func Limit(name string, remaining int64, reset time.Duration) string {
	return string(appendLimit(nil, name, remaining, reset))
}

// RetryAfter renders a wait as Retry-After's delta-seconds: rounded up, so
// at least 1 for any positive wait; "0" for none.
func RetryAfter(d time.Duration) string {
	return strconv.FormatInt(Seconds(d), 10)
}

// Seconds is d in whole seconds, rounded up; 0 for d ≤ 0, and capped at the
// largest sf-integer.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return min(s, maxInteger)
}

// PolicyValue is the RateLimit-Policy field for quotas: their items joined
// by ", ". "" for none.
func PolicyValue(qs []Quota) string {
	var buf [fieldBuffer]byte // written on the stack: the string is the one allocation
	b := buf[:0]
	for i, q := range qs {
		b = appendPolicy(separate(b, i), q.Name, q.Quota, q.Window)
	}
	return string(b)
}

// LimitValue is the RateLimit field for quotas: their items joined by ", ".
// "" for none.
func LimitValue(qs []Quota) string {
	var buf [fieldBuffer]byte
	b := buf[:0]
	for i, q := range qs {
		b = appendLimit(separate(b, i), q.Name, q.Remaining, q.Reset)
	}
	return string(b)
}

// fieldBuffer holds the fields of a few limits with names of ordinary
// length; longer ones grow onto the heap.
const fieldBuffer = 256

// separate starts list item i: ", " before every item but the first.
func separate(b []byte, i int) []byte {
	if i > 0 {
		b = append(b, ", "...)
	}
	return b
}

// Set sets both fields on h for quotas; it leaves h alone when there are none.
func Set(h http.Header, qs []Quota) {
	if len(qs) == 0 {
		return
	}
	h.Set(PolicyField, PolicyValue(qs))
	h.Set(LimitField, LimitValue(qs))
}

func appendPolicy(b []byte, name string, quota int64, window time.Duration) []byte {
	b = AppendString(b, name)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, clamp(quota), 10)
	b = append(b, ";w="...)
	return strconv.AppendInt(b, max(Seconds(window), 1), 10)
}

func appendLimit(b []byte, name string, remaining int64, reset time.Duration) []byte {
	b = AppendString(b, name)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, clamp(remaining), 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, Seconds(reset), 10)
}

// clamp keeps n a non-negative sf-integer.
func clamp(n int64) int64 { return min(max(n, 0), maxInteger) }

// AppendString appends s as an sf-string: quoted, with " and \ escaped.
// An sf-string holds printable ASCII only, so any other byte is written as
// %XX (upper-case hex), which keeps different names apart in practice and
// the field always parseable.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '%', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// String is s as an sf-string (see AppendString).
func String(s string) string {
	return string(AppendString(make([]byte, 0, len(s)+2), s))
}
