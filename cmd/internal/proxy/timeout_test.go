package proxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/cmd/internal/proxy"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// upstreams that are silent or slow in the ways --upstream-timeout is for.
// Each returns when the proxy gives up on it (its request's context ends).
var (
	silentBeforeHeaders = func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	silentMidBody       = func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial ")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
)

// steadyStream writes n chunks, one every gap: a stream that takes longer
// in all than the upstream timeout, but is never silent that long.
func steadyStream(n int, gap time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for range n {
			io.WriteString(w, "tick\n")
			w.(http.Flusher).Flush()
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
		}
	}
}

// frontends runs both proxies of floodgate proxy in front of upstream,
// with an upstream timeout of bound: the one-line proxy's bare
// NewReverseProxy (its limiting middleware does not touch the upstream)
// and the policy proxy of New.
func frontends(t *testing.T, upstream http.HandlerFunc, bound time.Duration) map[string]string {
	t.Helper()
	g := start(t, gatewayPolicy, upstream, func(o *proxy.Options) { o.UpstreamTimeout = bound })
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	front := httptest.NewServer(proxy.NewReverseProxy(target, proxy.Forwarding{UpstreamTimeout: bound}))
	t.Cleanup(front.Close)
	return map[string]string{"--limit": front.URL, "--config": g.url}
}

// get requests path and reads the whole answer, timing it.
func get(t *testing.T, url string) (resp *http.Response, body string, took time.Duration, readErr error) {
	t.Helper()
	client := &http.Client{Timeout: timing.Patience}
	began := time.Now()
	resp, err := client.Get(url + "/free/stream")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	b, readErr := io.ReadAll(resp.Body)
	return resp, string(b), time.Since(began), readErr
}

// An upstream that stays silent before its headers gets the client a
// problem+json 504, no sooner than the bound; in both proxy modes.
func TestUpstreamSilentBeforeHeadersIs504(t *testing.T) {
	const bound = 200 * time.Millisecond
	for mode, url := range frontends(t, silentBeforeHeaders, bound) {
		t.Run(mode, func(t *testing.T) {
			resp, body, took, err := get(t, url)
			if err != nil || resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %q %q (read: %v), want 504 problem+json", resp.StatusCode, resp.Header.Get("Content-Type"), body, err)
			}
			var p struct{ Status int }
			if err := json.Unmarshal([]byte(body), &p); err != nil || p.Status != http.StatusGatewayTimeout {
				t.Fatalf("problem %q: %v", body, err)
			}
			if took < bound {
				t.Fatalf("answered after %v, before the upstream timeout %v", took, bound)
			}
		})
	}
}

// An upstream that goes silent in its body is cut: the client sees the
// response end short, with an error, never a body that looks whole.
func TestUpstreamSilentMidBodyIsCut(t *testing.T) {
	const bound = 200 * time.Millisecond
	for mode, url := range frontends(t, silentMidBody, bound) {
		t.Run(mode, func(t *testing.T) {
			resp, body, took, err := get(t, url)
			if resp.StatusCode != http.StatusOK || body != "partial " || err == nil {
				t.Fatalf("%d %q (read: %v), want 200 \"partial \" and a read error", resp.StatusCode, body, err)
			}
			if took < bound {
				t.Fatalf("cut after %v, before the upstream timeout %v", took, bound)
			}
		})
	}
}

// The bound is on silence, not on the whole response: a stream that runs
// for longer than the bound but is never silent that long passes whole
// (server-sent events with a heartbeat). The gaps are a tenth of the bound
// so that a busy scheduler does not stretch one past it.
func TestUpstreamSteadyStreamIsNotCut(t *testing.T) {
	const bound, gap, chunks = time.Second, 100 * time.Millisecond, 15
	for mode, url := range frontends(t, steadyStream(chunks, gap), bound) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			resp, body, took, err := get(t, url)
			if err != nil || resp.StatusCode != http.StatusOK || body != strings.Repeat("tick\n", chunks) {
				t.Fatalf("%d %q (read: %v), want 200 and %d ticks", resp.StatusCode, body, err, chunks)
			}
			if took <= bound {
				t.Fatalf("the stream took %v, not more than the bound %v: it proves nothing", took, bound)
			}
		})
	}
}
