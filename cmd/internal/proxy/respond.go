package proxy

import (
	"net/http"
	"strings"
	"sync"

	"github.com/floodgate-io/floodgate/internal/problem"
)

// writeProblem answers status with a generic problem whose detail tells
// the client what went wrong.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	problem.Write(w, problem.Generic(status, detail))
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
		body, _ = c.m.LoadOrStore(key, problem.QuotaExceeded(violated).Marshal())
	}
	problem.WriteBody(w, http.StatusTooManyRequests, body.([]byte))
}
