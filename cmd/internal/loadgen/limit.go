package loadgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// Limit is an explicit limit sent with every HTTP call: Rate units per
// Period, counted by Algorithm (a name such as "token_bucket"). Burst is the
// bucket capacity, 0 meaning Rate, and only the two buckets have one.
type Limit struct {
	Algorithm string
	Rate      int64
	Period    time.Duration
	Burst     int64
}

// limitSyntax is quoted by every ParseLimit error, so that the user sees the
// expected form next to what went wrong.
const limitSyntax = "syntax: algorithm:rate/period[:burst=N], e.g. token_bucket:1000/1s:burst=2000"

// ParseLimit parses the --limit flag: algorithm:rate/period[:burst=N], as in
// "token_bucket:1000/1s:burst=1000", "sliding_window:100/1m" or
// "fixed_window:5000/h". The period is a Go duration; a bare unit means one
// of it. The limit is checked by the same rules the server applies, so that
// a run does not discover a bad limit through a wall of errors.
func ParseLimit(s string) (Limit, error) {
	fail := func(format string, args ...any) (Limit, error) {
		return Limit{}, fmt.Errorf("invalid limit %q: %s (%s)", s, fmt.Sprintf(format, args...), limitSyntax)
	}
	if strings.TrimSpace(s) == "" {
		return fail("empty")
	}
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) < 2 {
		return fail("missing rate/period")
	}
	var l Limit
	l.Algorithm = parts[0]
	kind, ok := algo.ParseKind(l.Algorithm)
	if !ok {
		return fail("unknown algorithm %q; want one of %s", l.Algorithm, algorithmNames())
	}

	rate, period, ok := strings.Cut(parts[1], "/")
	if !ok {
		return fail("%q is not rate/period", parts[1])
	}
	r, err := strconv.ParseInt(rate, 10, 64)
	if err != nil || r <= 0 {
		return fail("rate %q is not a positive integer", rate)
	}
	l.Rate = r
	given := period
	if period != "" && (period[0] < '0' || period[0] > '9') && period[0] != '.' {
		period = "1" + period // "/s" reads as "per second"
	}
	d, err := time.ParseDuration(period)
	if err != nil || d <= 0 {
		return fail("period %q is not a positive duration such as 1s, 100ms or 1m", given)
	}
	l.Period = d

	seen := false
	for _, opt := range parts[2:] {
		name, value, _ := strings.Cut(opt, "=")
		if name != "burst" {
			return fail("unknown option %q; the only option is burst=N", opt)
		}
		if seen {
			return fail("burst given twice")
		}
		seen = true
		if !kind.IsBucket() {
			// The windows would silently ignore it; saying so beats a
			// benchmark of a limit the user did not mean.
			return fail("burst applies only to %s and %s, not %s", algo.TokenBucket, algo.LeakyBucket, kind)
		}
		b, err := strconv.ParseInt(value, 10, 64)
		if err != nil || b <= 0 {
			return fail("burst %q is not a positive integer", value)
		}
		l.Burst = b
	}

	if _, err := algo.Compile(l.Algorithm, l.Rate, l.Period, l.Burst); err != nil {
		msg := strings.TrimPrefix(err.Error(), algo.ErrInvalidLimit.Error()+": ")
		return fail("%s", msg)
	}
	return l, nil
}

// String renders the limit in the syntax ParseLimit reads.
func (l Limit) String() string {
	s := fmt.Sprintf("%s:%d/%s", l.Algorithm, l.Rate, l.Period)
	if l.Burst != 0 {
		s += ":burst=" + strconv.FormatInt(l.Burst, 10)
	}
	return s
}

// limitJSON is the limit object of a /v1/allow body.
type limitJSON struct {
	Algorithm string `json:"algorithm"`
	Rate      int64  `json:"rate"`
	Period    string `json:"period"`
	Burst     int64  `json:"burst,omitempty"`
}

// MarshalJSON encodes the limit as /v1/allow expects it:
// {"algorithm":"token_bucket","rate":10,"period":"1s","burst":10}.
func (l Limit) MarshalJSON() ([]byte, error) {
	return json.Marshal(limitJSON{l.Algorithm, l.Rate, l.Period.String(), l.Burst})
}

// UnmarshalJSON decodes the form MarshalJSON writes.
func (l *Limit) UnmarshalJSON(b []byte) error {
	var j limitJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	d, err := time.ParseDuration(j.Period)
	if err != nil {
		return errors.New("limit period: " + err.Error())
	}
	*l = Limit{Algorithm: j.Algorithm, Rate: j.Rate, Period: d, Burst: j.Burst}
	return nil
}

func algorithmNames() string {
	var names []string
	for k := algo.TokenBucket; k <= algo.SlidingWindow; k++ {
		names = append(names, k.String())
	}
	return strings.Join(names, ", ")
}
