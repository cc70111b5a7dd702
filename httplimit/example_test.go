package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/httplimit"
)

// Unauthenticated traffic is limited per client address (behind a trusted
// proxy on the same host), authenticated traffic per API key as well.
func Example() {
	// A manual clock keeps the output stable; use floodgate.NewMemory() in
	// production.
	clock := floodgate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	limit, err := httplimit.New(floodgate.NewMemory(floodgate.WithClock(clock)), httplimit.Options{
		Rules: []httplimit.Rule{
			{Name: "per-ip", Limit: floodgate.PerMinute(100), Key: httplimit.ByIP(httplimit.IPOptions{
				TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
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
		r.RemoteAddr = "127.0.0.1:4242"              // the proxy
		r.Header.Set("X-Forwarded-For", "127.0.0.7") // the client, as the proxy saw it
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

// An LLM endpoint limits tokens per minute. Each call reserves the client's
// max_tokens as an estimate; the stream reports the tokens it really used
// in a trailer, and the key is charged that instead.
func ExampleActualFromTrailer() {
	clock := floodgate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	limit, err := httplimit.New(floodgate.NewMemory(floodgate.WithClock(clock)), httplimit.Options{
		Rules: []httplimit.Rule{{
			Name:   "tokens",
			Limit:  floodgate.PerMinute(10_000),
			Key:    httplimit.ByHeader("X-Api-Key"),
			Cost:   httplimit.CostFromHeader("X-Max-Tokens"),     // the estimate
			Actual: httplimit.ActualFromTrailer("X-Tokens-Used"), // the truth
		}},
	})
	if err != nil {
		panic(err)
	}
	completion := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Tokens-Used")
		for _, chunk := range []string{"Hello", ", world"} {
			fmt.Fprintf(w, "data: %s\n\n", chunk)
			w.(http.Flusher).Flush() // streams through the middleware
		}
		w.Header().Set("X-Tokens-Used", "1200")
	})
	h := limit(completion)
	for range 3 {
		r := httptest.NewRequest("POST", "/v1/completions", nil)
		r.Header.Set("X-Api-Key", "k-123")
		r.Header.Set("X-Max-Tokens", "4000")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		res := w.Result()
		io.Copy(io.Discard, res.Body)
		fmt.Printf("%d RateLimit: %s; used %s\n", res.StatusCode, res.Header.Get("RateLimit"), res.Trailer.Get("X-Tokens-Used"))
	}
	// Output:
	// 200 RateLimit: "tokens";r=6000;t=24; used 1200
	// 200 RateLimit: "tokens";r=4800;t=32; used 1200
	// 200 RateLimit: "tokens";r=3600;t=39; used 1200
}

// Each API key is on a plan, and its plan picks its limits. The plan comes
// from the key table: a client cannot upgrade itself with a plan header.
func ExampleTiers() {
	clock := floodgate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	perKey := func(n int64) []httplimit.Rule {
		return []httplimit.Rule{{Name: "requests", Limit: floodgate.PerMinute(n), Key: httplimit.ByHeader("X-Api-Key")}}
	}
	limit, err := httplimit.New(floodgate.NewMemory(floodgate.WithClock(clock)), httplimit.Options{
		Tiers: &httplimit.Tiers{
			Plans:        map[string][]httplimit.Rule{"free": perKey(10), "pro": perKey(1000)},
			APIKeyHeader: "X-Api-Key",
			APIKeys:      map[string]string{"k-alice": "pro", "k-bob": "free"},
		},
	})
	if err != nil {
		panic(err)
	}
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, c := range []struct{ key, plan string }{
		{"k-alice", ""},
		{"k-bob", ""},
		{"k-bob", "pro"}, // ignored: bob is on the free plan
		{"k-unknown", ""},
	} {
		r := httptest.NewRequest("GET", "/v1/items", nil)
		r.Header.Set("X-Api-Key", c.key)
		if c.plan != "" {
			r.Header.Set("X-Plan", c.plan)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			fmt.Printf("%s: %d %s\n", c.key, w.Code, http.StatusText(w.Code))
			continue
		}
		fmt.Printf("%s: %d RateLimit-Policy: %s\n", c.key, w.Code, w.Header().Get("RateLimit-Policy"))
	}
	// Output:
	// k-alice: 200 RateLimit-Policy: "pro/requests";q=1000;w=60
	// k-bob: 200 RateLimit-Policy: "free/requests";q=10;w=60
	// k-bob: 200 RateLimit-Policy: "free/requests";q=10;w=60
	// k-unknown: 403 Forbidden
}
