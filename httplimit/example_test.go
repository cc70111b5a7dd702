package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/httplimit"
)

// Unauthenticated traffic is limited per client address (behind a trusted
// load balancer), authenticated traffic per API key as well.
func Example() {
	// A manual clock keeps the output stable; use floodgate.NewMemory() in
	// production.
	clock := floodgate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	limit, err := httplimit.New(floodgate.NewMemory(floodgate.WithClock(clock)), httplimit.Options{
		Rules: []httplimit.Rule{
			{Name: "per-ip", Limit: floodgate.PerMinute(100), Key: httplimit.ByIP(httplimit.IPOptions{
				TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
			})},
			{Name: "per-key", Limit: floodgate.PerMinute(2), Key: httplimit.ByHeader("X-Api-Key")},
		},
		Missing: httplimit.Pass, // no API key: only the per-ip rule applies
	})
	if err != nil {
		panic(err)
	}
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 3 {
		r := httptest.NewRequest("GET", "/v1/items", nil)
		r.RemoteAddr = "10.0.0.1:4242"
		r.Header.Set("X-Forwarded-For", "198.51.100.7")
		r.Header.Set("X-Api-Key", "k-123")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s; Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "per-ip";r=99;t=1, "per-key";r=1;t=30; Retry-After: ""
	// 200 RateLimit: "per-ip";r=98;t=2, "per-key";r=0;t=60; Retry-After: ""
	// 429 RateLimit: "per-ip";r=98;t=2, "per-key";r=0;t=30; Retry-After: "30"
}
