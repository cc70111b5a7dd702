package cli

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// proxyAdminListening reads the proxy's addresses, its own and its admin
// listener's, from its start's log line.
var proxyAdminListening = regexp.MustCompile(`proxy serving" http=(\S+) admin=(\S+)`)

// routedShopPolicy is shopPolicy with a limit of 2 an hour and a route
// that takes the user from the X-User header.
const routedShopPolicy = `domain: shop
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: hour, requests_per_unit: 2}
routes:
  - path_prefix: /
    descriptors: [{entries: [{key: user, from: "header:X-User"}]}]
`

// floodgate proxy --admin --admin-token, one-line and with --config: after
// requests over the limit, the admin listener's /metrics counts them under
// the policy ("proxy" one-line, the domain with --config), /admin/top
// names the key denied most and /admin/status says the surface.
func TestProxyAdminShowsWhoIsLimited(t *testing.T) {
	for _, tc := range []struct {
		name               string
		args               []string
		policy, limit, key string
		nearKey            string
		domains            []string
	}{
		{"one-line", []string{"--limit", "2/m", "--by", "header:X-User"}, "proxy", "proxy", "proxy:mallory", "proxy:bob", nil},
		{"--config", []string{"--config", writePolicy(t, routedShopPolicy)}, "shop", "per-user", "shop/user=mallory", "shop/user=bob", []string{"shop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxyAddr, adminAddr := startProxyAdmin(t, append(tc.args, "--admin", "127.0.0.1:0", "--admin-token", "T")...)
			clearOfWindowEdge(t, time.Hour)
			for i, user := range []string{"mallory", "mallory", "mallory", "mallory", "mallory", "bob", "bob"} {
				resp, body := get(t, "http://"+proxyAddr+"/items", "X-User", user)
				if want := map[bool]int{true: 429, false: 200}[i >= 2 && i < 5]; resp.StatusCode != want {
					t.Fatalf("request %d of %s: %d %q, want %d", i, user, resp.StatusCode, body, want)
				}
			}
			admin := "http://" + adminAddr
			checkMetricsCount(t, admin+"/metrics", tc.policy, tc.limit, 4, 3)
			checkAdminSaysWhoIsLimited(t, admin, "T", tc.policy, tc.key, tc.nearKey, "proxy", tc.domains)
			checkAdminNeedsTheToken(t, admin)
		})
	}
}

// startProxyAdmin is startProxyLogs for a proxy with --admin: it returns
// the proxy's address and its admin listener's.
func startProxyAdmin(t *testing.T, args ...string) (proxyAddr, adminAddr string) {
	t.Helper()
	_, logs := startProxyLogs(t, args...)
	m := proxyAdminListening.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no admin address in the proxy's start:\n%s", logs)
	}
	return m[1], m[2]
}

// The proxy's admin routes need --admin and, for /admin, --admin-token:
// --admin-token alone is refused at the start; without a token /metrics is
// served and /admin answers 404 saying it is off.
func TestProxyAdminNeedsItsListenerAndToken(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"proxy", "--http", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1", "--limit", "2/m", "--admin-token", "T"}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "--admin-token needs --admin") {
		t.Errorf("--admin-token without --admin: exit %d, stderr %q; want an error naming both", code, errOut.String())
	}

	_, adminAddr := startProxyAdmin(t, "--limit", "2/m", "--admin", "127.0.0.1:0")
	admin := "http://" + adminAddr
	if resp, _ := get(t, admin+"/metrics"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /metrics without a token configured: %d, want 200", resp.StatusCode)
	}
	for _, p := range []string{"/admin/top", "/admin/status", "/admin/ui/"} {
		if resp, body := get(t, admin+p, "Authorization", "Bearer T"); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "no admin token") {
			t.Errorf("GET %s without a token configured: %d %q, want 404 saying the admin API is off", p, resp.StatusCode, body)
		}
	}
}
