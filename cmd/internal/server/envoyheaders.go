package server

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// EnvoyHeaders names the three headers envoyproxy/ratelimit adds to its
// answers with LIMIT_RESPONSE_HEADERS_ENABLED=true (LIMIT_LIMIT_HEADER,
// LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER), so that the clients behind
// an Envoy switched over to Floodgate keep reading the headers they read.
// They describe one descriptor of the request: the last one over its
// limit, or else the first with the fewest hits remaining (see
// envoyHeaderPick). Their values: the limit's requests per unit, the hits
// remaining, and the whole seconds to the end of its window.
type EnvoyHeaders struct {
	Limit, Remaining, Reset string
}

// DefaultEnvoyHeaders are envoyproxy/ratelimit's default names.
func DefaultEnvoyHeaders() EnvoyHeaders {
	return EnvoyHeaders{Limit: "RateLimit-Limit", Remaining: "RateLimit-Remaining", Reset: "RateLimit-Reset"}
}

// ErrHeaderName is what Validate wraps for a name no HTTP header can have.
var ErrHeaderName = errors.New("invalid header name")

// Validate refuses an empty name, or one with a character a header name
// cannot hold: Envoy would drop or reject the header.
func (h EnvoyHeaders) Validate() error {
	var errs []error
	for _, f := range []struct{ what, name string }{{"limit", h.Limit}, {"remaining", h.Remaining}, {"reset", h.Reset}} {
		if f.name == "" || strings.ContainsFunc(f.name, notTokenChar) {
			errs = append(errs, fmt.Errorf("%w for the %s header: %q", ErrHeaderName, f.what, f.name))
		}
	}
	return errors.Join(errs...)
}

// notTokenChar reports a character outside RFC 9110's token.
func notTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// envoyHeaderPick is envoyproxy/ratelimit's choice of the descriptor its
// headers describe, fed the statuses in order (the newest last): a status
// with a limit replaces the one picked when it has strictly fewer hits
// remaining, and a status over its limit (not in quota mode) always does.
// picked is the index of the status chosen so far (-1 at first), least its
// remaining hits (math.MaxUint32 at first).
func envoyHeaderPick(statuses []replyStatus, quota bool, picked int, least uint32) (int, uint32) {
	i := len(statuses) - 1
	st := statuses[i]
	if !st.limited {
		return picked, least
	}
	if st.code == rlsv3.RateLimitResponse_OVER_LIMIT && !quota {
		return i, 0
	}
	if st.remaining < least {
		return i, st.remaining
	}
	return picked, least
}

// appendValues appends the headers describing st; the reset is in whole
// seconds, rounded up as Envoy's service never answers 0.
func (h EnvoyHeaders) appendValues(out []replyHeader, st replyStatus) []replyHeader {
	return append(out,
		replyHeader{h.Limit, strconv.FormatUint(uint64(st.perUnit), 10)},
		replyHeader{h.Remaining, strconv.FormatUint(uint64(st.remaining), 10)},
		replyHeader{h.Reset, strconv.FormatInt(int64((st.untilReset+time.Second-1)/time.Second), 10)})
}

// leastUnset is the remaining hits envoyHeaderPick starts from.
const leastUnset = math.MaxUint32
