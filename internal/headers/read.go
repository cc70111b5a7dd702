package headers

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The legacy fields, as GitHub, Twitter and many gateways wrote them before
// the IETF draft.
const (
	LegacyLimitField     = "X-RateLimit-Limit"
	LegacyRemainingField = "X-RateLimit-Remaining"
	LegacyResetField     = "X-RateLimit-Reset"
)

// epochThreshold tells the two meanings of X-RateLimit-Reset apart: a value
// above it (2001-09-09 as Unix seconds, 31 years as a delay) is a Unix
// timestamp, as GitHub sends; below it, delta-seconds, as most gateways do.
const epochThreshold = 1_000_000_000

// ErrMalformed is wrapped by every error of the readers below.
var ErrMalformed = errors.New("malformed rate limit field")

// ParseRetryAfter reads a Retry-After value: delta-seconds or an HTTP-date
// (RFC 9110 §10.2.3). A date is measured from date, the response's own Date
// field, when that parses: both are read on the server's clock, so the skew
// between the server's clock and the client's cancels out. Without a usable
// Date it is measured from now. A date in the past is a wait of 0; a delay
// too large for a time.Duration is the largest one.
func ParseRetryAfter(value, date string, now time.Time) (time.Duration, error) {
	value = strings.TrimSpace(value)
	if n, ok := digits(value); ok {
		return secondsDuration(float64(n)), nil
	}
	at, err := http.ParseTime(value)
	if err != nil {
		return 0, fmt.Errorf("%w: Retry-After %q is neither delta-seconds nor an HTTP-date", ErrMalformed, value)
	}
	return max(at.Sub(serverNow(date, now)), 0), nil
}

// ParseLegacyReset reads X-RateLimit-Reset: a Unix timestamp in seconds
// when above 10^9 (measured like an HTTP-date in ParseRetryAfter: from the
// response's Date when it has one), otherwise delta-seconds. Fractions of a
// second are accepted; a negative, NaN or infinite value is an error.
func ParseLegacyReset(value, date string, now time.Time) (time.Duration, error) {
	value = strings.TrimSpace(value)
	f, err := strconv.ParseFloat(value, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || strings.ContainsAny(value, "xXpP_") {
		return 0, fmt.Errorf("%w: %s %q is not a non-negative number of seconds", ErrMalformed, LegacyResetField, value)
	}
	if f <= epochThreshold {
		return secondsDuration(f), nil
	}
	ref := serverNow(date, now)
	return max(secondsDuration(f-float64(ref.UnixNano())/1e9), 0), nil
}

// ParseQuotas reads the RateLimit field (limit) and the RateLimit-Policy
// field (policy, may be empty) into one Quota per item of RateLimit, in
// order: Remaining from r, Reset from t (0 when absent), and Quota and
// Window from q and w of the RateLimit-Policy item of the same name (0 when
// there is none). A name may be an sf-string or a token. An item without r,
// or with an r or t that is not a non-negative integer, is an error, as is
// a field that is not a Structured Field List.
func ParseQuotas(limit, policy string) ([]Quota, error) {
	items, err := ParseList(limit)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, LimitField, err)
	}
	var policies []Item
	if strings.TrimSpace(policy) != "" {
		if policies, err = ParseList(policy); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, PolicyField, err)
		}
	}
	out := make([]Quota, 0, len(items))
	for _, it := range items {
		q, err := quotaOf(it, policies)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

func quotaOf(it Item, policies []Item) (Quota, error) {
	name, ok := itemName(it)
	if !ok {
		return Quota{}, fmt.Errorf("%w: %s: an item's name is %v, want a string or a token", ErrMalformed, LimitField, it.Value)
	}
	q := Quota{Name: name}
	r, err := intParam(it, "r", true)
	if err != nil {
		return Quota{}, err
	}
	t, err := intParam(it, "t", false)
	if err != nil {
		return Quota{}, err
	}
	q.Remaining, q.Reset = r, secondsDuration(float64(t))
	for _, p := range policies {
		if n, ok := itemName(p); ok && n == name {
			quota, _ := p.Param("q")
			window, _ := p.Param("w")
			q.Quota, _ = quota.(int64)
			w, _ := window.(int64)
			q.Window = secondsDuration(float64(max(w, 0)))
			break
		}
	}
	return q, nil
}

// itemName is an item's policy name: an sf-string or, leniently, a token.
func itemName(it Item) (string, bool) {
	switch v := it.Value.(type) {
	case string:
		return v, true
	case Token:
		return string(v), true
	}
	return "", false
}

// intParam is a RateLimit item's non-negative integer parameter key; 0 when
// absent and not required.
func intParam(it Item, key string, required bool) (int64, error) {
	v, ok := it.Param(key)
	if !ok {
		if required {
			return 0, fmt.Errorf("%w: %s: item %v has no %s", ErrMalformed, LimitField, it.Value, key)
		}
		return 0, nil
	}
	n, ok := v.(int64)
	if !ok || n < 0 {
		return 0, fmt.Errorf("%w: %s: item %v has %s=%v, want a non-negative integer", ErrMalformed, LimitField, it.Value, key, v)
	}
	return n, nil
}

// digits reads 1*DIGIT as a non-negative integer, saturating at
// math.MaxInt64 instead of failing on a long one.
func digits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (math.MaxInt64-9)/10 {
			n = math.MaxInt64
			continue
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// secondsDuration is s seconds, saturating at the largest time.Duration.
func secondsDuration(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}

// serverNow is the server's time when the response was made: its Date
// field, or now when there is none that parses.
func serverNow(date string, now time.Time) time.Time {
	if date == "" {
		return now
	}
	if t, err := http.ParseTime(date); err == nil {
		return t
	}
	return now
}
