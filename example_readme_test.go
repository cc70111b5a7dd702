package floodgate_test

//lint:file-ignore SA4006 the README's snippets leave some errors and decisions to the reader

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/adaptive"
	"github.com/floodgate-io/floodgate/client"
	"github.com/floodgate-io/floodgate/httplimit"
	"github.com/floodgate-io/floodgate/redisstore"
)

// Example_readme is the README's Go snippets, in order, between the
// markers; TestReadmeSnippets keeps them the same. It is compiled, not
// run (it has no Output): it would listen and reach for Redis.
func Example_readme() {
	// README begins
	ctx := context.Background()
	limiter := floodgate.NewMemory()               // in process: sharded, 0 allocations per decision
	limit := floodgate.PerSecond(10).WithBurst(20) // token bucket: 10/s, bursts of 20

	d, err := limiter.AllowN(ctx, "user:42", limit, 1)
	switch {
	case err != nil: // bad input: errors.Is(err, floodgate.ErrInvalidLimit) ...
	case !d.Allowed: // answer 429, Retry-After: d.RetryAfter
	default: // serve; d.Remaining units are left
	}
	tokens := int64(1200) // the request's token count
	ds, err := limiter.AllowAll(ctx, []floodgate.Request{
		{Key: "tenant:acme", Limit: floodgate.PerMinute(1000), Cost: 1},
		{Key: "user:42", Limit: floodgate.PerSecond(5), Cost: 1},
		{Key: "tpm:acme", Limit: floodgate.Limit{Algorithm: floodgate.SlidingWindow, Rate: 90_000, Period: time.Minute}, Cost: tokens},
	})
	whole := floodgate.Combine(ds) // allowed only if all allow; nothing is consumed otherwise
	if !whole.Allowed {            // answer 429, Retry-After: whole.RetryAfter
	}
	mw, err := httplimit.New(limiter, httplimit.Options{Rules: []httplimit.Rule{
		{Name: "per-ip", Limit: floodgate.PerSecond(10).WithBurst(20),
			Key: httplimit.ByIP(httplimit.IPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})},
		{Name: "per-key", Limit: floodgate.PerMinute(600), Key: httplimit.ByHeader("X-API-Key")},
	}})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	go http.ListenAndServe("127.0.0.1:3000", mw(handler))
	algo, _ := adaptive.NewGradient2(adaptive.Gradient2Options{}) // learns the limit from latency
	lim, _ := adaptive.NewLimiter(adaptive.LimiterOptions{Algorithm: algo})
	shed, _ := httplimit.Concurrency(lim, httplimit.ConcurrencyOptions{}) // X-Priority: critical | default | sheddable
	go http.ListenAndServe("127.0.0.1:3000", mw(shed(handler)))
	api := &http.Client{Transport: client.NewTransport(nil)} // retries 429/503 as the server asks, backs off with jitter
	if resp, err := api.Get("http://127.0.0.1:3000/"); err == nil {
		resp.Body.Close()
	}
	d, err = floodgate.Wait(ctx, limiter, "user:42", floodgate.PerSecond(10), 1) // blocks until it may pass, or fails fast past the deadline
	store, err := redisstore.New(redisstore.Config{Addrs: []string{"127.0.0.1:6379"}, KeyPrefix: "fg:"})
	d, err = store.AllowN(ctx, "user:42", limit, 1) // same API, same decisions, shared by every node
	// README ends
}

// goBlocks are the README's Go code blocks.
var goBlocks = regexp.MustCompile("(?s)```go\n(.*?)```")

// The README's Go snippets, joined in order, are Example_readme's body
// between its markers (without its indentation), so that what the README
// shows compiles as it stands.
func TestReadmeSnippets(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var shown strings.Builder
	for _, m := range goBlocks.FindAllSubmatch(readme, -1) {
		shown.Write(m[1])
	}
	self, err := os.ReadFile("example_readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(self), "// README begins\n")
	body, _, _ = strings.Cut(body, "\t// README ends")
	var compiled strings.Builder
	for line := range strings.Lines(body) {
		compiled.WriteString(strings.TrimPrefix(line, "\t"))
	}
	if shown.String() != compiled.String() {
		t.Errorf("the README's Go snippets differ from Example_readme's body:\nREADME:\n%s\nExample_readme:\n%s", shown.String(), compiled.String())
	}
}
