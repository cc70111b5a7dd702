package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/internal/testkit"
)

var proxyListening = regexp.MustCompile(`proxy serving" http=(\S+)`)

// startProxy runs `floodgate proxy` in process in front of a test upstream.
func startProxy(t *testing.T, args ...string) string {
	t.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream", "yes")
		io.WriteString(w, "hello from "+r.URL.Path)
	}))
	t.Cleanup(upstream.Close)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testkit.SyncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"proxy", "--http", "127.0.0.1:0", "--upstream", upstream.URL}, args...), logs, logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("proxy exited %d; logs:\n%s", code, logs)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("proxy did not stop; logs:\n%s", logs)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := proxyListening.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("proxy exited %d; logs:\n%s", code, logs)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("proxy did not start; logs:\n%s", logs)
	return ""
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
