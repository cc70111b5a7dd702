package proxy_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate"
)

// A route's descriptor values are held to the key-size policy: an API key
// past floodgate.MaxValueBytes is refused with a 400 that names the limit
// and quotes only the value's start; the upstream never sees the request
// and nothing is counted. A value at the maximum passes.
func TestRouteValuesHeldToTheKeyPolicy(t *testing.T) {
	g := start(t, gatewayPolicy, hello)
	for _, tc := range []struct {
		name   string
		size   int
		status int
	}{
		{"at the maximum", floodgate.MaxValueBytes, http.StatusOK},
		{"one byte over", floodgate.MaxValueBytes + 1, http.StatusBadRequest},
		{"100 KB", 100 << 10, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := g.hits.Load()
			resp, body := g.do(t, "GET /anything", "X-API-Key", strings.Repeat("k", tc.size))
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %.300s, want %d", resp.StatusCode, body, tc.status)
			}
			if tc.status == http.StatusOK {
				return
			}
			switch {
			case len(body) > 600:
				t.Fatalf("a refusal of %d bytes echoes the value", len(body))
			case !strings.Contains(body, `value \"kkkk`) || !strings.Contains(body, "is longer than 1024 bytes"):
				t.Fatalf("refusal %s does not name the value and the limit", body)
			case g.hits.Load() != before:
				t.Fatal("the refused request reached the upstream")
			}
		})
	}
}
