package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/cmd/internal/proxy"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// gatewayPolicy is the policy the tests run: per-route limits of one request
// per minute, so that the second request of a route tells which limit it
// counted against.
const gatewayPolicy = `
domain: gw
descriptors:
  - key: route
    value: admin
    rate_limit: {unit: minute, requests_per_unit: 1, name: admin}
  - key: route
    value: writes
    rate_limit: {unit: minute, requests_per_unit: 1, name: writes}
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 5, name: per-key}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 10, name: tokens}
  - key: shaped
    rate_limit: {algorithm: leaky_bucket, unit: minute, requests_per_unit: 1, burst: 3, name: shaped}
  - key: blocked
    rate_limit: {unit: minute, requests_per_unit: 0, name: blocked}
routes:
  - name: free
    path_prefix: /free
    descriptors: []
  - name: admin
    host: admin.example.com
    descriptors: [{entries: [{key: route, value: admin}]}]
  - name: writes
    path_prefix: /items
    methods: [POST, DELETE]
    descriptors: [{entries: [{key: route, value: writes}]}]
  - name: tokens
    path_prefix: /complete
    cost: {header: X-Tokens}
    descriptors: [{entries: [{key: tenant, from: "header:X-Tenant"}]}]
  - name: shaped
    path_prefix: /shaped
    descriptors: [{entries: [{key: shaped, value: all}]}]
  - name: blocked
    path_prefix: /blocked
    descriptors: [{entries: [{key: blocked, value: all}]}]
  - name: keyed
    descriptors: [{entries: [{key: api_key, from: "header:X-API-Key"}]}]
`

// gateway is a proxy under test with its upstream, on real listeners.
type gateway struct {
	url    string
	clock  *floodgate.ManualClock
	engine *engine.Engine
	hits   atomic.Int64 // requests the upstream saw
}

// start runs upstream behind a proxy over policyYAML, counting in memory
// on a manual clock.
func start(t *testing.T, policyYAML string, upstream http.HandlerFunc, opts ...func(*proxy.Options)) *gateway {
	t.Helper()
	g := &gateway{clock: floodgate.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.hits.Add(1)
		upstream(w, r)
	}))
	t.Cleanup(up.Close)
	mem := floodgate.NewMemory(floodgate.WithClock(g.clock))
	t.Cleanup(mem.Close)
	g.engine = engine.New(servicetest.Policies(t, policyYAML), engine.OneStore{Limiter: mem})
	target, _ := url.Parse(up.URL)
	o := proxy.Options{Upstream: target, Engine: g.engine}
	for _, opt := range opts {
		opt(&o)
	}
	p, err := proxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	g.url = front.URL
	return g
}

func hello(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Upstream", "yes")
	io.WriteString(w, "hello "+r.Method+" "+r.URL.Path)
}

// do sends "METHOD [host]/path" with header name, value pairs.
func (g *gateway) do(t *testing.T, line string, header ...string) (*http.Response, string) {
	t.Helper()
	method, target, _ := strings.Cut(line, " ")
	host, path, _ := strings.Cut(target, "/")
	req, err := http.NewRequest(method, g.url+"/"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// Each route counts its own limit: the second request of a route with a
// limit of one per minute is refused, those of other routes are not.
func TestRoutesByHostPrefixAndMethod(t *testing.T) {
	g := start(t, gatewayPolicy, hello)
	steps := []struct {
		request string
		status  int
		policy  string // the RateLimit-Policy item expected, "" for none
	}{
		{"GET admin.example.com/users", 200, `"admin";q=1;w=60`},
		{"GET ADMIN.example.com:8080/other", 429, `"admin";q=1;w=60`}, // same host, any path
		{"POST h.example.com/items", 200, `"writes";q=1;w=60`},
		{"DELETE h.example.com/items/7", 429, `"writes";q=1;w=60`},
		{"GET h.example.com/items", 200, `"per-key";q=5;w=60`}, // GET is not a write: the catch-all
		{"GET h.example.com/free/stuff", 200, ""},
		{"GET h.example.com/free/stuff", 200, ""}, // never limited
		{"POST h.example.com/itemsx", 200, `"per-key";q=5;w=60`},
	}
	for _, s := range steps {
		resp, body := g.do(t, s.request, "X-API-Key", "k")
		if resp.StatusCode != s.status || resp.Header.Get("RateLimit-Policy") != s.policy {
			t.Fatalf("%s: %d, RateLimit-Policy %q; want %d, %q (body %q)", s.request, resp.StatusCode,
				resp.Header.Get("RateLimit-Policy"), s.status, s.policy, body)
		}
	}
	if got := g.hits.Load(); got != 6 {
		t.Errorf("upstream saw %d requests, want the 6 admitted", got)
	}
}

// A refused request gets 429, Retry-After, the RateLimit fields with the
// wait as t, and a problem body naming the limit; it never reaches the
// upstream. After the wait it passes.
func TestDeniedRequest(t *testing.T) {
	g := start(t, gatewayPolicy, hello)
	g.do(t, "GET admin.example.com/")
	g.clock.Advance(20 * time.Second)
	resp, body := g.do(t, "GET admin.example.com/")
	var p struct {
		Type     string   `json:"type"`
		Status   int      `json:"status"`
		Violated []string `json:"violated-policies"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	h := resp.Header
	switch {
	case resp.StatusCode != 429, h.Get("Retry-After") != "40", h.Get("RateLimit") != `"admin";r=0;t=40`:
		t.Fatalf("%d %v", resp.StatusCode, h)
	case h.Get("Content-Type") != "application/problem+json", p.Status != 429,
		!strings.HasSuffix(p.Type, "#quota-exceeded"), len(p.Violated) != 1 || p.Violated[0] != "admin":
		t.Fatalf("body %q, content type %q", body, h.Get("Content-Type"))
	case h.Get("X-Upstream") != "" || g.hits.Load() != 1:
		t.Fatalf("the refused request reached the upstream")
	}
	g.clock.Advance(40 * time.Second)
	if resp, _ := g.do(t, "GET admin.example.com/"); resp.StatusCode != 200 {
		t.Fatalf("after Retry-After: %d", resp.StatusCode)
	}
}

// A request the client must fix is answered 400 with what to fix, and a
// limit of zero refuses everything without a Retry-After.
func TestRequestsRefusedOutright(t *testing.T) {
	g := start(t, gatewayPolicy, hello)
	for _, tc := range []struct {
		request string
		header  []string
		status  int
		detail  string
	}{
		{"GET h/anything", nil, 400, `no header:X-API-Key for entry \"api_key\"`},
		{"GET h/complete", []string{"X-Tenant", "t"}, 400, "missing header X-Tokens"},
		{"GET h/complete", []string{"X-Tenant", "t", "X-Tokens", "-3"}, 400, "X-Tokens must be a non-negative integer"},
		{"GET h/complete", []string{"X-Tenant", "t", "X-Tokens", "99999999999"}, 400, "hits 99999999999 outside"},
		{"GET h/complete", []string{"X-Tenant", "t", "X-Tokens", "11"}, 429, ""},
		{"GET h/free/../admin", nil, 400, "segments; send it resolved"},
		{"GET h/blocked", nil, 429, `"blocked"`},
	} {
		req, _ := http.NewRequest(http.MethodGet, g.url, nil)
		req.URL.Opaque = "//" + strings.TrimPrefix(g.url, "http://") + "/" + strings.SplitN(tc.request, "/", 2)[1] // sent as written
		for i := 0; i+1 < len(tc.header); i += 2 {
			req.Header.Set(tc.header[i], tc.header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.detail) {
			t.Errorf("%s %v: %d %s; want %d with %q", tc.request, tc.header, resp.StatusCode, body, tc.status, tc.detail)
		}
		if resp.StatusCode == 429 && tc.request == "GET h/blocked" && resp.Header.Get("Retry-After") != "" {
			t.Errorf("a request that can never pass got Retry-After %q", resp.Header.Get("Retry-After"))
		}
	}
	if g.hits.Load() != 0 {
		t.Errorf("upstream saw %d requests, want none", g.hits.Load())
	}
}

// The cost comes from the route: ten tokens a minute pass as 4 + 6, and
// the next token is refused.
func TestCostFromHeader(t *testing.T) {
	g := start(t, gatewayPolicy, hello)
	for _, s := range []struct {
		tokens string
		status int
	}{{"4", 200}, {"6", 200}, {"1", 429}} {
		if resp, _ := g.do(t, "POST h/complete", "X-Tenant", "acme", "X-Tokens", s.tokens); resp.StatusCode != s.status {
			t.Fatalf("%s tokens: %d, want %d", s.tokens, resp.StatusCode, s.status)
		}
	}
	if resp, _ := g.do(t, "POST h/complete", "X-Tenant", "other", "X-Tokens", "10"); resp.StatusCode != 200 {
		t.Fatalf("another tenant: %d", resp.StatusCode)
	}
}

// The upstream's status, headers (repeated ones too) and body come back
// as sent; the client's headers reach it, with X-Forwarded-For appended.
func TestHeadersPassThrough(t *testing.T) {
	var seen http.Header
	g := start(t, gatewayPolicy, func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Request-Host", r.Host)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "made")
	})
	resp, body := g.do(t, "PUT api.example.com/things", "X-API-Key", "k", "X-Custom", "v", "X-Forwarded-For", "198.51.100.1")
	h := resp.Header
	switch {
	case resp.StatusCode != 201 || body != "made":
		t.Fatalf("%d %q", resp.StatusCode, body)
	case strings.Join(h.Values("Set-Cookie"), ";") != "a=1;b=2", h.Get("Cache-Control") != "no-store":
		t.Errorf("upstream headers lost: %v", h)
	case h.Get("X-Request-Host") != "api.example.com":
		t.Errorf("the upstream saw Host %q", h.Get("X-Request-Host"))
	case h.Get("RateLimit") != `"per-key";r=4;t=60`:
		t.Errorf("RateLimit %q", h.Get("RateLimit"))
	case seen.Get("X-Custom") != "v", seen.Get("X-API-Key") != "k":
		t.Errorf("request headers lost: %v", seen)
	case seen.Get("X-Forwarded-For") != "198.51.100.1, 127.0.0.1":
		t.Errorf("X-Forwarded-For %q", seen.Get("X-Forwarded-For"))
	}
}

// Bodies stream both ways: the client reads the upstream's first event
// while the upstream still waits for the client's second chunk.
func TestStreaming(t *testing.T) {
	g := start(t, gatewayPolicy, func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			t.Error(err)
		}
		in := bufio.NewReader(r.Body)
		for {
			line, err := in.ReadString('\n')
			if err != nil {
				return
			}
			io.WriteString(w, "echo: "+line)
			w.(http.Flusher).Flush()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
	defer cancel()
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/stream", pr)
	req.Header.Set("X-API-Key", "k")
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(done)
			return
		}
		done <- resp
	}()
	io.WriteString(pw, "one\n")
	resp := <-done
	if resp == nil {
		t.FailNow()
	}
	defer resp.Body.Close()
	out := bufio.NewReader(resp.Body)
	for _, word := range []string{"one", "two"} {
		if word != "one" {
			io.WriteString(pw, word+"\n")
		}
		line, err := out.ReadString('\n')
		if err != nil || line != "echo: "+word+"\n" {
			t.Fatalf("read %q, %v; want the echo of %q before the request ends", line, err, word)
		}
	}
	pw.Close()
	if rest, _ := io.ReadAll(out); len(rest) != 0 {
		t.Fatalf("trailing %q", rest)
	}
}

// A leaky_bucket limit holds a request for its Delay and refuses one whose
// Delay exceeds MaxDelay, telling it when its place will have left the queue.
func TestLeakyBucketShapes(t *testing.T) {
	g := start(t, gatewayPolicy, hello, func(o *proxy.Options) { o.MaxDelay = 30 * time.Second })
	if resp, _ := g.do(t, "GET h/shaped"); resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	// The queue departs one a minute: the next would be held 60 s.
	resp, _ := g.do(t, "GET h/shaped")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("held beyond MaxDelay: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// The refused request's place is given back, so the queue departs at
	// 60 s only. 50ms before that the next request is held those 50ms, on
	// the real clock.
	g.clock.Advance(60*time.Second - 50*time.Millisecond)
	start := time.Now()
	if resp, _ := g.do(t, "GET h/shaped"); resp.StatusCode != 200 {
		t.Fatalf("held request: %d", resp.StatusCode)
	}
	if held := time.Since(start); held < 50*time.Millisecond {
		t.Fatalf("held %s, want at least the 50ms Delay", held)
	}
}

// A client that leaves while held gives its place in the queue back: the
// request after it is held as if it had never come. The queue departs one a
// minute and MaxDelay is a minute, so a request 50ms before the first
// departure is held 50ms if the place was given back and refused (a Delay
// of a minute and 50ms) if it was kept: the outcome does not depend on how
// long anything took.
func TestLeavingClientReleasesItsPlace(t *testing.T) {
	g := start(t, gatewayPolicy, hello, func(o *proxy.Options) { o.MaxDelay = time.Minute })
	queued := func() int64 { // places taken in the queue of burst 3
		d, err := g.engine.Decide(context.Background(), engine.Request{Domain: "gw", Descriptors: []engine.Descriptor{{Entries: []policy.Entry{{Key: "shaped", Value: "all"}}, HitsSet: true}}})
		if err != nil {
			t.Fatal(err)
		}
		return 3 - d.Descriptors[0].Limits[0].Decision.Remaining
	}
	if resp, _ := g.do(t, "GET h/shaped"); resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	answered := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", g.url+"/shaped", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			answered <- fmt.Errorf("held request answered %d", resp.StatusCode)
			return
		}
		answered <- nil
	}()
	waitUntil(t, "the second request to be held", func() bool { return queued() == 2 })
	leave() // held a minute: the client gives up
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	// The proxy gives the place back once it sees the client gone, a
	// moment after the client sees its error.
	waitUntil(t, "the leaving client's place to be given back", func() bool { return queued() == 1 })
	g.clock.Advance(60*time.Second - 50*time.Millisecond)
	if resp, _ := g.do(t, "GET h/shaped"); resp.StatusCode != 200 {
		t.Fatalf("next request: %d (Retry-After %q), want it held 50ms: the leaving client's place was kept", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// waitUntil polls cond until it holds; timing.Patience bounds a hang.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timing.Patience); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timing.Patience, what)
		}
	}
}

// Loading a new policy set into the engine changes the routes at once.
func TestReloadChangesRoutes(t *testing.T) {
	g := start(t, gatewayPolicy, hello)
	if resp, _ := g.do(t, "GET h/x"); resp.StatusCode != 400 {
		t.Fatalf("before: %d, want 400 (no API key)", resp.StatusCode)
	}
	g.engine.Reload(servicetest.Policies(t, "domain: gw\ndescriptors: [{key: k, rate_limit: {unit: minute, requests_per_unit: 1}}]\n"+
		"routes: [{path_prefix: /limited, descriptors: [{entries: [{key: k, value: v}]}]}]\n"))
	if resp, _ := g.do(t, "GET h/x"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" {
		t.Fatalf("after: %d, RateLimit %q; want an unrouted, unlimited request", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
}

// failing is a store that cannot answer.
type failing struct{}

func (failing) AllowN(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
	return floodgate.Decision{}, floodgate.ErrStoreUnavailable
}

// A store that cannot answer gives 503 (wrap it in failover to decide by
// policy instead); an upstream that cannot be reached gives 502.
func TestFailures(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(hello))
	deadURL, _ := url.Parse(up.URL)
	up.Close() // nothing listens there any more
	liveUp := httptest.NewServer(http.HandlerFunc(hello))
	defer liveUp.Close()
	liveURL, _ := url.Parse(liveUp.URL)
	mem := floodgate.NewMemory()
	defer mem.Close()
	for _, tc := range []struct {
		name     string
		upstream *url.URL
		store    floodgate.Limiter
		status   int
	}{
		{"store down", liveURL, failing{}, 503},
		{"upstream down", deadURL, mem, 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := proxy.New(proxy.Options{Upstream: tc.upstream, Engine: engine.New(servicetest.Policies(t, gatewayPolicy), engine.OneStore{Limiter: tc.store})})
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(p)
			defer front.Close()
			req, _ := http.NewRequest(http.MethodGet, front.URL+"/x", nil)
			req.Header.Set("X-API-Key", "k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %q, want %d problem+json", resp.StatusCode, resp.Header.Get("Content-Type"), tc.status)
			}
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	eng := engine.New(servicetest.Policies(t, gatewayPolicy), engine.OneStore{Limiter: floodgate.NewMemory()})
	for _, tc := range []struct {
		name string
		opts proxy.Options
		want string
	}{
		{"no upstream", proxy.Options{Engine: eng}, "no upstream"},
		{"not http", proxy.Options{Upstream: &url.URL{Scheme: "ftp", Host: "example.com"}, Engine: eng}, `"ftp://example.com"`},
		{"no host", proxy.Options{Upstream: &url.URL{Scheme: "http"}, Engine: eng}, "with a host"},
		{"no engine", proxy.Options{Upstream: &url.URL{Scheme: "http", Host: "example.com"}}, "no engine"},
		{"negative delay", proxy.Options{Upstream: &url.URL{Scheme: "http", Host: "example.com"}, Engine: eng, MaxDelay: -1}, "MaxDelay"},
	} {
		_, err := proxy.New(tc.opts)
		if !errors.Is(err, proxy.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidOptions naming %q", tc.name, err, tc.want)
		}
	}
}

// A route whose cost is an estimate reserves it, then charges or refunds
// the difference the upstream reports in a trailer, after the body.
func TestReconciledCost(t *testing.T) {
	const llm = `
domain: llm
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 100, name: tokens}
routes:
  - name: completions
    cost: {estimate: 10, actual_trailer: X-Tokens-Used}
    descriptors: [{entries: [{key: tenant, from: "header:X-Tenant"}]}]
`
	var used atomic.Int64
	g := start(t, llm, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Tokens-Used")
		io.WriteString(w, "streamed answer")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Tokens-Used", strconv.FormatInt(used.Load(), 10))
	})
	remaining := func() int64 {
		t.Helper()
		d, err := g.engine.Decide(context.Background(), engine.Request{Domain: "llm", Descriptors: []engine.Descriptor{{Entries: []policy.Entry{{Key: "tenant", Value: "acme"}}, HitsSet: true}}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Descriptors[0].Limits[0].Decision.Remaining
	}
	for i, s := range []struct {
		used, remaining int64
	}{
		{40, 60}, // 10 reserved, 30 more charged
		{3, 57},  // 10 reserved, 7 given back
		{70, 0},  // past the limit: charged all the same
	} {
		used.Store(s.used)
		if resp, body := g.do(t, "POST h/v1/completions", "X-Tenant", "acme"); resp.StatusCode != 200 || body != "streamed answer" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		if got := remaining(); got != s.remaining {
			t.Fatalf("after request %d used %d: %d remaining, want %d", i, s.used, got, s.remaining)
		}
	}
	if resp, _ := g.do(t, "POST h/v1/completions", "X-Tenant", "acme"); resp.StatusCode != 429 {
		t.Fatalf("after the overrun: %d, want 429", resp.StatusCode)
	}
}
