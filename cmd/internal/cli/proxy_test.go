package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

var proxyListening = regexp.MustCompile(`proxy serving" http=(\S+)`)

// startProxy runs `floodgate proxy` in process in front of a test upstream.
func startProxy(t *testing.T, args ...string) string {
	t.Helper()
	addr, _ := startProxyLogs(t, args...)
	return addr
}

// startProxyLogs is startProxy that also returns the proxy's logs.
func startProxyLogs(t *testing.T, args ...string) (string, *servicetest.SyncBuffer) {
	t.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream", "yes")
		io.WriteString(w, "hello from "+r.URL.Path)
	}))
	t.Cleanup(upstream.Close)
	m, logs := startCommand(t, proxyListening, append([]string{"proxy", "--http", "127.0.0.1:0", "--upstream", upstream.URL}, args...))
	return m[1], logs
}

func get(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
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

// The one-line start of the README: a limit per API key in front of a backend.
func TestProxyLimitsPerHeader(t *testing.T) {
	addr := startProxy(t, "--limit", "3/m", "--by", "header:X-API-Key")
	for i := range 3 {
		resp, body := get(t, "http://"+addr+"/items", "X-API-Key", "alice")
		if resp.StatusCode != 200 || body != "hello from /items" || resp.Header.Get("X-Upstream") != "yes" {
			t.Fatalf("request %d: %d %q %v", i, resp.StatusCode, body, resp.Header)
		}
		if resp.Header.Get("RateLimit") == "" {
			t.Fatalf("request %d: no RateLimit field", i)
		}
	}
	resp, body := get(t, "http://"+addr+"/items", "X-API-Key", "alice")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "violated-policies") {
		t.Fatalf("4th request: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp, _ := get(t, "http://"+addr+"/items", "X-API-Key", "bob"); resp.StatusCode != 200 {
		t.Fatalf("another key: %d", resp.StatusCode)
	}
	if resp, _ := get(t, "http://"+addr+"/items"); resp.StatusCode != 400 {
		t.Fatalf("no API key: %d, want 400", resp.StatusCode)
	}
}

// --missing says what a request without the --by header gets: deny (the
// default, the middleware's) answers 400, pass forwards it unlimited,
// shared counts all such requests in one count of their own.
func TestProxyMissingKey(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		codes []int // of three requests without X-API-Key, on a limit of 2/m
	}{
		{nil, []int{400, 400, 400}},
		{[]string{"--missing", "deny"}, []int{400, 400, 400}},
		{[]string{"--missing", "pass"}, []int{200, 200, 200}},
		{[]string{"--missing", "shared"}, []int{200, 200, 429}},
	} {
		addr := startProxy(t, append([]string{"--limit", "2/m", "--by", "header:X-API-Key"}, tc.args...)...)
		for i, want := range tc.codes {
			if resp, body := get(t, "http://"+addr+"/items"); resp.StatusCode != want {
				t.Errorf("%v: request %d without a key: %d %q, want %d", tc.args, i, resp.StatusCode, body, want)
			}
		}
	}
}

// A client that forges X-Forwarded-For from an untrusted address is still
// counted by its own address.
func TestProxyIgnoresSpoofedForwardedFor(t *testing.T) {
	addr := startProxy(t, "--limit", "2/m", "--by", "ip")
	for i, xff := range []string{"127.0.0.11", "127.0.0.12"} {
		if resp, _ := get(t, "http://"+addr+"/", "X-Forwarded-For", xff); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	if resp, _ := get(t, "http://"+addr+"/", "X-Forwarded-For", "127.0.0.13"); resp.StatusCode != 429 {
		t.Fatalf("a forged header bought another request: %d", resp.StatusCode)
	}
}

func TestProxyRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--limit", "10/m"}, "--upstream"},
		{[]string{"--upstream", "ftp://example", "--limit", "10/m"}, "--upstream"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--limit", "ten/m"}, `"ten"`},
		{[]string{"--upstream", "http://127.0.0.1:1", "--limit", "10/fortnight"}, `"fortnight"`},
		{[]string{"--upstream", "http://127.0.0.1:1", "--limit", "10/m", "--by", "cookie"}, "--by"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--limit", "10/m", "--algorithm", "gcra"}, "gcra"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--limit", "10/m", "--trusted-proxies", "127.0.0.0/99"}, "--trusted-proxies"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--limit", "10/m", "--strategy", "local", "--nodes", "3"}, "--strategy, --nodes: the cluster strategies apply to a policy's limits"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--limit", "10/m", "--missing", "allow"}, `invalid argument "allow" for "--missing" flag: "allow": want deny, pass or shared`},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "policy.yaml", "--missing", "pass"}, "--config replaces --missing"},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append([]string{"proxy", "--http", "127.0.0.1:0"}, tc.args...), &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error naming %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]time.Duration{"100/s": time.Second, "100/m": time.Minute, "5/h": time.Hour, "1/d": 24 * time.Hour, "500/5m": 5 * time.Minute} {
		if _, d, err := parseRate(in); err != nil || d != want {
			t.Errorf("%s: %v, %v", in, d, err)
		}
	}
}

// routedPolicy limits the admin host to 2 requests a day, writes under
// /items to 1 per client address, and leaves the rest alone. Its windows
// are a day long: the tests count on the real clock, after
// clearOfWindowEdge.
const routedPolicy = `domain: gw
descriptors:
  - key: host
    value: admin.example.com
    rate_limit: {unit: day, requests_per_unit: 2, name: admin}
  - key: writes
    rate_limit: {unit: day, requests_per_unit: 1, name: writes}
routes:
  - host: admin.example.com
    descriptors: [{entries: [{key: host, from: host}]}]
  - path_prefix: /items
    methods: [POST]
    descriptors: [{entries: [{key: writes, from: ip}]}]
`

func writePolicy(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// send makes one request with the given method and Host header.
func send(t *testing.T, method, host, url string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// With --config the proxy limits by the policy's routes.
func TestProxyWithConfigRoutes(t *testing.T) {
	addr := startProxy(t, "--config", writePolicy(t, routedPolicy))
	clearOfWindowEdge(t, 24*time.Hour)
	for i, s := range []struct {
		method, host, path string
		status             int
	}{
		{"GET", "admin.example.com", "/a", 200},
		{"POST", "admin.example.com", "/items", 200}, // the first matching route: the host's
		{"GET", "admin.example.com", "/b", 429},
		{"POST", "www.example.com", "/items/1", 200},
		{"POST", "www.example.com", "/items/2", 429},
		{"GET", "www.example.com", "/items/3", 200}, // not a write: no route
	} {
		resp := send(t, s.method, s.host, "http://"+addr+s.path)
		if resp.StatusCode != s.status {
			t.Fatalf("step %d %s %s%s: %d, want %d", i, s.method, s.host, s.path, resp.StatusCode, s.status)
		}
		if s.status == 429 && (resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit") == "") {
			t.Fatalf("step %d: 429 without Retry-After or RateLimit: %v", i, resp.Header)
		}
		if s.status == 200 && resp.Header.Get("X-Upstream") != "yes" {
			t.Fatalf("step %d: upstream headers lost: %v", i, resp.Header)
		}
	}
}

// Two proxies with --redis share one count.
func TestProxyWithConfigSharesRedis(t *testing.T) {
	srv := testkit.StartServer(t)
	path := writePolicy(t, routedPolicy)
	a := startProxy(t, "--config", path, "--redis", srv.Addr())
	b := startProxy(t, "--config", path, "--redis", srv.Addr())
	clearOfWindowEdge(t, 24*time.Hour)
	for i, s := range []struct {
		addr   string
		status int
	}{{a, 200}, {b, 200}, {a, 429}, {b, 429}} {
		if resp := send(t, "GET", "admin.example.com", "http://"+s.addr+"/"); resp.StatusCode != s.status {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, s.status)
		}
	}
	if keys := srv.Do(t, "DBSIZE"); keys == "0" {
		t.Fatalf("nothing counted in Redis")
	}
}

// A bad policy, or flags that do not go with --config, stop the proxy
// before it listens, with the file and line of the problem.
func TestProxyRejectsBadConfig(t *testing.T) {
	bad := writePolicy(t, "domain: gw\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\nroutes:\n  - host: a.example.com:80\n    descriptors: []\n")
	noRoutes := writePolicy(t, "domain: gw\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")
	good := writePolicy(t, routedPolicy)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", bad}, bad + `:6: routes[0]: host "a.example.com:80" is not a host name`},
		{[]string{"--config", noRoutes}, "no routes"},
		{[]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, "missing.yaml: cannot read"},
		{[]string{"--config", good, "--limit", "10/m"}, "--config replaces --limit"},
		{[]string{"--config", good, "--by", "ip", "--burst", "3"}, "--config replaces --burst, --by"},
		{[]string{"--config", good, "--failure-mode", "fail_maybe"}, "--failure-mode"},
		{[]string{"--config", good, "--max-delay", "0s"}, "--max-delay"},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append([]string{"proxy", "--http", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1"}, tc.args...), &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error with %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

// Editing the policy file changes the routes of a running proxy; a broken
// edit keeps the routes in force.
func TestProxyReloadsConfig(t *testing.T) {
	path := writePolicy(t, routedPolicy)
	addr, logs := startProxyLogs(t, "--config", path)
	clearOfWindowEdge(t, 24*time.Hour)
	limited := func() bool {
		send(t, "POST", "www.example.com", "http://"+addr+"/other")
		return send(t, "POST", "www.example.com", "http://"+addr+"/other").StatusCode == 429
	}
	if limited() {
		t.Fatal("/other is limited before the edit")
	}
	rewrite := func(yaml string) {
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(strings.Replace(routedPolicy, "path_prefix: /items", "path_prefix: /other", 1))
	deadline := time.Now().Add(timing.Patience)
	for !limited() {
		if time.Now().After(deadline) {
			t.Fatal("the new route did not take effect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rewrite("domain: gw\nroutes: [{host: 'bad host'}]\n")
	for !strings.Contains(logs.String(), "config reload failed") {
		if time.Now().After(deadline) {
			t.Fatalf("the broken edit was not refused; logs:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !limited() {
		t.Fatal("a broken edit dropped the routes in force")
	}
}
