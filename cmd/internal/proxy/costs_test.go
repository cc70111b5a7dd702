package proxy_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
)

// tokens is an API key with requests, tokens and images per minute, and a
// shaped queue that also counts requests.
var tokens = "domain: llm\ndescriptors:\n" + servicetest.TokenLimits(3, 1000) + `      - {name: images, unit: minute, requests_per_unit: 5}
  - key: queue
    rate_limits:
      - {name: queue-rpm, counts: requests, unit: minute, requests_per_unit: 10}
      - {name: shaper, algorithm: leaky_bucket, unit: minute, requests_per_unit: 1, burst: 3}
routes:
  - name: completions
    path_prefix: /complete
    cost: {estimate: 100, actual_trailer: X-Tokens-Used}
    costs: {images: 0}
    descriptors: [{entries: [{key: api_key, from: "header:X-API-Key"}]}]
  - name: images
    path_prefix: /images
    cost: {header: X-Tokens}
    costs: {images: {header: X-Images}}
    descriptors: [{entries: [{key: api_key, from: "header:X-API-Key"}]}]
  - name: queue
    path_prefix: /queue
    descriptors: [{entries: [{key: queue, value: all}]}]
`

// remaining reads a descriptor's limits without counting: name -> remaining.
func (g *gateway) remaining(t *testing.T, key, value string) map[string]int64 {
	t.Helper()
	r, err := g.engine.Decide(context.Background(), engine.Request{Domain: "llm",
		Descriptors: []engine.Descriptor{{Entries: []policy.Entry{{Key: key, Value: value}}, HitsSet: true}}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, ls := range r.Descriptors[0].Limits {
		out[ls.Rule.Name] = ls.Decision.Remaining
	}
	return out
}

// A route's cost goes to the limits that count units, the requests limit
// takes 1, the route's costs go to the limits it names, and a reconciled
// cost corrects only the units limits the route does not name.
func TestRouteCountsRequestsAndUnitsApart(t *testing.T) {
	g := start(t, tokens, func(w http.ResponseWriter, r *http.Request) {
		// A trailer: the response ends when the proxy has reconciled.
		w.Header().Set("Trailer", "X-Tokens-Used")
		io.WriteString(w, "ok")
		w.Header().Set("X-Tokens-Used", r.Header.Get("X-Upstream-Used"))
	})
	for i, s := range []struct {
		line             string
		header           []string
		status           int
		rpm, tpm, images int64
	}{
		{"POST h/complete", []string{"X-Upstream-Used", "400"}, 200, 2, 600, 5}, // 100 reserved, 300 more charged
		{"POST h/images", []string{"X-Tokens", "50", "X-Images", "2"}, 200, 1, 550, 3},
		{"POST h/complete", []string{"X-Upstream-Used", "30"}, 200, 0, 520, 3},        // 70 given back
		{"POST h/images", []string{"X-Tokens", "1", "X-Images", "1"}, 429, 0, 520, 3}, // rpm denies, tokens to spare
		{"POST h/images", []string{"X-Tokens", "1"}, 400, 0, 520, 3},                  // no X-Images: the route's cost is missing
	} {
		resp, body := g.do(t, s.line, append([]string{"X-API-Key", "k1"}, s.header...)...)
		got := g.remaining(t, "api_key", "k1")
		if resp.StatusCode != s.status || got["rpm"] != s.rpm || got["tpm"] != s.tpm || got["images"] != s.images {
			t.Fatalf("step %d %s %v: %d %q, remaining %v; want %d, rpm %d, tpm %d, images %d",
				i, s.line, s.header, resp.StatusCode, body, got, s.status, s.rpm, s.tpm, s.images)
		}
	}
}

// A request refused after it was admitted (held longer than MaxDelay)
// gives back what it took, the request it counted included.
func TestReleaseGivesBackTheRequest(t *testing.T) {
	g := start(t, tokens, hello)
	for i, want := range []struct {
		status             int
		queueRPM, shaperAt int64
	}{
		{200, 9, 2},
		{429, 9, 2}, // would be held 60 s: refused, and its place and request given back
	} {
		resp, _ := g.do(t, "GET h/queue")
		got := g.remaining(t, "queue", "all")
		if resp.StatusCode != want.status || got["queue-rpm"] != want.queueRPM || got["shaper"] != want.shaperAt {
			t.Fatalf("request %d: %d, remaining %v; want %d, queue-rpm %d, shaper %d", i, resp.StatusCode, got, want.status, want.queueRPM, want.shaperAt)
		}
	}
	if resp, _ := g.do(t, "GET h/queue"); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != strconv.Itoa(60) {
		t.Fatalf("the next is held as long: %d %v", resp.StatusCode, resp.Header)
	}
}
