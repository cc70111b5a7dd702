package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// shopPolicy is the policy of the observability tests: five requests an
// hour per user, so that a test's requests all fall in one window.
const shopPolicy = `domain: shop
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: hour, requests_per_unit: 5}
`

// shopRequest is a /v1/allow body for one request of user.
func shopRequest(user string) string {
	return `{"domain":"shop","descriptors":[{"entries":[{"key":"user","value":"` + user + `"}]}]}`
}

// overTheShopLimit sends what the operator then looks into: mallory 12
// requests (8 over gRPC, 4 over HTTP: 7 denied), bob 4 (at 80% of the
// limit, allowed, near it) and alice 1.
func overTheShopLimit(t *testing.T, httpAddr, grpcAddr string) {
	t.Helper()
	clearOfWindowEdge(t, time.Hour)
	for i := range 8 {
		r := shouldRateLimit(t, grpcAddr, "shop", "user", "mallory")
		if want := i >= 5; (r.OverallCode == pb.RateLimitResponse_OVER_LIMIT) != want {
			t.Fatalf("mallory's gRPC request %d: %v, want over the limit %v", i, r.OverallCode, want)
		}
	}
	for i := range 4 {
		if code, body := allow(t, httpAddr, shopRequest("mallory")); code != http.StatusTooManyRequests {
			t.Fatalf("mallory's HTTP request %d: %d %v, want 429", i, code, body)
		}
		if code, body := allow(t, httpAddr, shopRequest("bob")); code != http.StatusOK {
			t.Fatalf("bob's request %d: %d %v, want 200", i, code, body)
		}
	}
	if code, body := allow(t, httpAddr, shopRequest("alice")); code != http.StatusOK {
		t.Fatalf("alice's request: %d %v, want 200", code, body)
	}
}

// adminJSON GETs an admin route with token ("": none) and decodes its
// JSON answer into out; it returns the status.
func adminJSON(t *testing.T, url, token string, out any) int {
	t.Helper()
	var header []string
	if token != "" {
		header = []string{"Authorization", "Bearer " + token}
	}
	resp, body := get(t, url, header...)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal([]byte(body), out); err != nil {
			t.Fatalf("GET %s: %v in %q", url, err, body)
		}
	}
	return resp.StatusCode
}

// serve --admin-token, as an operator runs it: after requests over a
// limit, over gRPC and HTTP, the admin routes name who was limited, who
// is near the limit and what the server is; /metrics counts the same.
// With --admin the same routes are on the admin listener alone.
func TestServeAdminShowsWhoIsLimited(t *testing.T) {
	policy := writePolicy(t, shopPolicy)
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (httpAddr, grpcAddr, adminAddr string)
	}{
		{"on the HTTP listener", func(t *testing.T) (string, string, string) {
			httpAddr, grpcAddr, _ := startServe(t, "--config", policy, "--admin-token", "T")
			return httpAddr, grpcAddr, httpAddr
		}},
		{"on the --admin listener", func(t *testing.T) (string, string, string) {
			m, _ := startCommand(t, adminListening, []string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
				"--admin", "127.0.0.1:0", "--config", policy, "--admin-token", "T"})
			return m[1], m[2], m[3]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			httpAddr, grpcAddr, adminAddr := tc.start(t)
			overTheShopLimit(t, httpAddr, grpcAddr)
			admin := "http://" + adminAddr
			checkAdminSaysWhoIsLimited(t, admin, "T", "shop", "shop/user=mallory", "shop/user=bob", "serve", []string{"shop"})
			checkMetricsCount(t, admin+"/metrics", "shop", "per-user", 10, 7)
			checkAdminNeedsTheToken(t, admin)
			if adminAddr != httpAddr {
				if resp, body := get(t, "http://"+httpAddr+"/admin/top", "Authorization", "Bearer T"); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "admin listener") {
					t.Errorf("GET /admin/top on the HTTP listener with --admin: %d %q, want 404 saying it is on the admin listener", resp.StatusCode, body)
				}
			}
		})
	}
}

// topList, nearList and statusAnswer are the parts of the admin routes'
// answers the tests read (observe/insight and cmd/internal/observers
// document the whole).
type topList struct {
	Lists []struct {
		Policy, By string
		Entries    []struct {
			Key   string
			Count int64
		}
	}
}

type nearList struct {
	Entries []struct {
		Policy, Limit, Key string
		Used               float64
	}
}

type statsAnswer struct {
	Policies []struct {
		Policy string
		Totals map[string]int64
	}
}

type statusAnswer struct {
	Surface  string
	Store    struct{ Name string }
	Policies []struct {
		Domain string
		Limits int
	}
}

// checkAdminSaysWhoIsLimited reads the admin routes at admin with token:
// /admin/top names denied first among policy's denied keys, near is on
// /admin/near-limit, /admin/stats counts policy's decisions and
// /admin/status says surface, the memory store and the domains.
func checkAdminSaysWhoIsLimited(t *testing.T, admin, token, policy, denied, near, surface string, domains []string) {
	t.Helper()
	var top topList
	if code := adminJSON(t, admin+"/admin/top?policy="+policy+"&by=denied", token, &top); code != http.StatusOK ||
		len(top.Lists) != 1 || len(top.Lists[0].Entries) == 0 || top.Lists[0].Entries[0].Key != denied {
		t.Errorf("GET /admin/top?policy=%s&by=denied: %d %+v, want %q first", policy, code, top, denied)
	}
	var nl nearList
	code := adminJSON(t, admin+"/admin/near-limit", token, &nl)
	found := false
	for _, e := range nl.Entries {
		found = found || (e.Policy == policy && e.Key == near && e.Used >= 0.8)
	}
	if code != http.StatusOK || !found {
		t.Errorf("GET /admin/near-limit: %d %+v, want %q of %q at 0.8 or more", code, nl, near, policy)
	}
	var stats statsAnswer
	code = adminJSON(t, admin+"/admin/stats", token, &stats)
	found = false
	for _, p := range stats.Policies {
		found = found || (p.Policy == policy && p.Totals["allowed"] > 0 && p.Totals["denied"] > 0)
	}
	if code != http.StatusOK || !found {
		t.Errorf("GET /admin/stats: %d %+v, want %q with allowed and denied decisions", code, stats, policy)
	}
	var st statusAnswer
	code = adminJSON(t, admin+"/admin/status", token, &st)
	var got []string
	for _, p := range st.Policies {
		got = append(got, p.Domain)
	}
	if code != http.StatusOK || st.Surface != surface || st.Store.Name != "memory" || fmt.Sprint(got) != fmt.Sprint(domains) {
		t.Errorf("GET /admin/status: %d %+v, want surface %q, store memory, domains %v", code, st, surface, domains)
	}
}

// checkMetricsCount reads the Prometheus text at url: policy's limit has
// allowed and denied decisions, and near-limit ones.
func checkMetricsCount(t *testing.T, url, policy, limit string, allowed, denied int) {
	t.Helper()
	resp, body := get(t, url)
	for _, want := range []string{
		fmt.Sprintf(`floodgate_decisions_total{limit=%q,policy=%q,result="allowed"} %d`, limit, policy, allowed),
		fmt.Sprintf(`floodgate_decisions_total{limit=%q,policy=%q,result="denied"} %d`, limit, policy, denied),
		fmt.Sprintf(`floodgate_near_limit_total{limit=%q,policy=%q} `, limit, policy),
	} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, no %q in:\n%s", url, resp.StatusCode, want, metricLines(body))
		}
	}
}

// metricLines is the floodgate_ series of a Prometheus text, for a
// failure message.
func metricLines(body string) string {
	var b strings.Builder
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "floodgate_") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// checkAdminNeedsTheToken: the live view's page is served to anyone (it
// holds no data), the JSON routes only with the token.
func checkAdminNeedsTheToken(t *testing.T, admin string) {
	t.Helper()
	if resp, body := get(t, admin+"/admin/ui/"); resp.StatusCode != http.StatusOK ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "Floodgate live view") {
		t.Errorf("GET /admin/ui/ without a token: %d %s %.80q, want the page", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	for _, p := range []string{"/admin/top", "/admin/near-limit", "/admin/events", "/admin/stats", "/admin/status"} {
		for _, header := range [][]string{nil, {"Authorization", "Bearer wrong"}} {
			if resp, _ := get(t, admin+p, header...); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s with %v: %d, want 401", p, header, resp.StatusCode)
			}
		}
	}
}
