package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// The problem type of draft-ietf-httpapi-ratelimit-headers-10 for a
// request refused by a quota policy.
const (
	quotaExceededType  = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	quotaExceededTitle = "Request cannot be satisfied as assigned quota has been exceeded"
)

// problem is an RFC 9457 problem details body.
type problem struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail,omitempty"`
	Violated []string `json:"violated-policies,omitempty"`
}

// writeProblem answers status with a generic problem whose detail tells
// the client what went wrong.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	writeBody(w, status, marshal(problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail}))
}

// quotaBodies caches the 429 bodies by their violated policies. Policy
// names come from the configuration, not from requests, so the cache
// holds at most a few bodies per limit; under overload it spares
// marshalling the same body for every refusal.
type quotaBodies struct {
	m sync.Map // string (names joined by NUL) -> []byte
}

// write answers 429 naming the violated policies.
func (c *quotaBodies) write(w http.ResponseWriter, violated []string) {
	key := strings.Join(violated, "\x00")
	body, ok := c.m.Load(key)
	if !ok {
		body, _ = c.m.LoadOrStore(key, marshal(problem{
			Type: quotaExceededType, Title: quotaExceededTitle, Status: http.StatusTooManyRequests, Violated: violated,
		}))
	}
	writeBody(w, http.StatusTooManyRequests, body.([]byte))
}

func marshal(p problem) []byte {
	body, _ := json.Marshal(p) // strings and an int: cannot fail
	return append(body, '\n')
}

// writeBody writes a problem+json body. The field names are already in
// canonical form, so they are set without canonicalising them again.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/problem+json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(status)
	w.Write(body)
}
