// Package problem writes RFC 9457 problem details, the JSON bodies of the
// answers a rate limiter gives over HTTP, among them the quota-exceeded
// problem of draft-ietf-httpapi-ratelimit-headers-10.
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/floodgate-io/floodgate/internal/excerpt"
)

// The problem type of draft-ietf-httpapi-ratelimit-headers-10 for a
// request refused by a quota policy.
const (
	QuotaExceededType  = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	QuotaExceededTitle = "Request cannot be satisfied as assigned quota has been exceeded"
)

// The problem type of a request shed because the server (or its backend)
// is overloaded: a 503, not the caller's quota, so not QuotaExceededType.
// The URI is Floodgate's own; its page explains what to do (come back after
// Retry-After, or send less sheddable traffic).
const (
	OverloadedType  = "https://github.com/floodgate-io/floodgate/blob/main/docs/adaptive.md#overloaded"
	OverloadedTitle = "Request shed because the server is overloaded"
)

// Details is a problem details object.
type Details struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail,omitempty"`
	Violated []string `json:"violated-policies,omitempty"`
}

// QuotaExceeded is the 429 problem naming the violated policies.
func QuotaExceeded(violated []string) Details {
	return Details{Type: QuotaExceededType, Title: QuotaExceededTitle, Status: http.StatusTooManyRequests, Violated: violated}
}

// Overloaded is the 503 problem of a shed request; detail says which class
// was shed and why.
func Overloaded(detail string) Details {
	return Details{Type: OverloadedType, Title: OverloadedTitle, Status: http.StatusServiceUnavailable, Detail: excerpt.Message(detail)}
}

// Generic is a problem of type about:blank whose title is the status's
// text and whose detail tells the client what went wrong.
func Generic(status int, detail string) Details {
	return Details{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: excerpt.Message(detail)}
}

// Marshal is the body, newline-terminated.
func (d Details) Marshal() []byte {
	body, _ := json.Marshal(d) // strings and an int: cannot fail
	return append(body, '\n')
}

// Write answers with d.
func Write(w http.ResponseWriter, d Details) { WriteBody(w, d.Status, d.Marshal()) }

// WriteBody answers status with a marshalled problem, for callers that
// keep bodies they send often. The field names are in canonical form
// already, so they are set without canonicalising them again.
func WriteBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/problem+json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(status)
	w.Write(body)
}
