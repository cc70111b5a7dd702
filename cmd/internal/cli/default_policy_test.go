package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/assemble"
	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/cmd/internal/proxy"
	"github.com/floodgate-io/floodgate/cmd/internal/server"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
)

// completionsRoute puts the built-in policy's plans behind the proxy: the
// token count comes in a header and is the request's cost.
const completionsRoute = `
routes:
  - name: completions
    cost: {header: X-Tokens}
    descriptors:
      - entries:
          - {key: plan, from: "header:X-Plan"}
          - {key: api_key, from: "header:X-API-Key"}
`

// builtIn is the built-in policy served over HTTP and gRPC and behind the
// proxy, on one engine counting in memory on a manual clock, on real
// loopback listeners.
type builtIn struct {
	http, proxy string
	rls         pb.RateLimitServiceClient
}

func startBuiltIn(t *testing.T) *builtIn {
	t.Helper()
	p, err := config.Parse("built-in example policy", append(append([]byte{}, defaultPolicy...), completionsRoute...))
	if err != nil {
		t.Fatal(err)
	}
	set, err := policy.NewSet(p)
	if err != nil {
		t.Fatal(err)
	}
	clock := floodgate.NewManualClock(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	mem := floodgate.NewMemory(floodgate.WithClock(clock))
	t.Cleanup(mem.Close)
	eng := engine.New(set, engine.OneStore{Limiter: mem})

	srv := server.New(server.Options{Engine: eng, Limiter: mem})
	httpLn, grpcLn := servicetest.Loopback(t), servicetest.Loopback(t)
	servicetest.Serve(t, func(ctx context.Context) error { return srv.Serve(ctx, httpLn, grpcLn) })
	conn, err := grpc.NewClient(grpcLn.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "completed") }))
	t.Cleanup(upstream.Close)
	target, _ := url.Parse(upstream.URL)
	px, err := proxy.New(proxy.Options{Upstream: target, Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(px)
	t.Cleanup(front.Close)
	return &builtIn{http: httpLn.Addr().String(), proxy: front.URL, rls: pb.NewRateLimitServiceClient(conn)}
}

// surface sends one request of key on the free plan with tokens as its
// cost, and says whether it passed.
type surface func(t *testing.T, b *builtIn, key string, tokens int64) bool

var surfaces = []struct {
	name string
	send surface
}{
	{"/v1/allow with cost", func(t *testing.T, b *builtIn, key string, tokens int64) bool {
		code, body := allow(t, b.http, freePlan(key, fmt.Sprintf(`,"cost":%d`, tokens)))
		if code != 200 && code != 429 {
			t.Fatalf("/v1/allow: %d %v", code, body)
		}
		return code == 200
	}},
	{"gRPC with hits_addend", func(t *testing.T, b *builtIn, key string, tokens int64) bool {
		d := &rlsv3.RateLimitDescriptor{Entries: []*rlsv3.RateLimitDescriptor_Entry{{Key: "plan", Value: "free"}, {Key: "api_key", Value: key}}}
		resp, err := b.rls.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: "example", HitsAddend: uint32(tokens), Descriptors: []*rlsv3.RateLimitDescriptor{d}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.OverallCode == pb.RateLimitResponse_OK
	}},
	{"the proxy with a cost header", func(t *testing.T, b *builtIn, key string, tokens int64) bool {
		req, _ := http.NewRequest(http.MethodPost, b.proxy+"/v1/chat/completions", nil)
		req.Header.Set("X-Plan", "free")
		req.Header.Set("X-API-Key", key)
		req.Header.Set("X-Tokens", strconv.FormatInt(tokens, 10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 && resp.StatusCode != 429 {
			t.Fatalf("proxy: %d", resp.StatusCode)
		}
		return resp.StatusCode == 200
	}},
}

func freePlan(key, extra string) string {
	return fmt.Sprintf(`{"domain":"example","descriptors":[{"entries":[{"key":"plan","value":"free"},{"key":"api_key","value":%q}]}]%s}`, key, extra)
}

// remaining reads a key's free-rpm and free-tpm through /v1/allow's cost 0.
func (b *builtIn) remaining(t *testing.T, key string) (rpm, tpm int64) {
	t.Helper()
	code, body := allow(t, b.http, freePlan(key, `,"cost":0`))
	if code != 200 {
		t.Fatalf("read: %d %v", code, body)
	}
	left := map[string]int64{}
	for _, l := range body["descriptors"].([]any)[0].(map[string]any)["limits"].([]any) {
		l := l.(map[string]any)
		left[l["name"].(string)] = int64(l["remaining"].(float64))
	}
	return left["free-rpm"], left["free-tpm"]
}

// The built-in policy does what its comment says, on every surface: the
// token count sent as the request's cost goes to free-tpm, free-rpm counts
// one per request, and either limit denies on its own.
func TestBuiltInPolicyCountsRequestsAndTokensApart(t *testing.T) {
	b := startBuiltIn(t)
	for _, s := range surfaces {
		t.Run(s.name, func(t *testing.T) {
			for i, step := range []struct {
				key      string
				requests int
				tokens   int64
				last     bool // whether the last request passes
				rpm, tpm int64
			}{
				{"tokens", 5, 500, true, 55, 7500},
				{"tokens", 15, 500, true, 40, 0},    // free-tpm spent
				{"tokens", 1, 500, false, 40, 0},    // denied by free-tpm: free-rpm has room and keeps it
				{"tokens", 1, 1, false, 40, 0},      // even one token
				{"requests", 60, 1, true, 0, 9940},  // free-rpm spent
				{"requests", 1, 1, false, 0, 9940},  // denied by free-rpm: tokens to spare
				{"requests", 1, 10, false, 0, 9940}, // whatever the cost
			} {
				key := s.name + "/" + step.key
				passed := false
				for range step.requests {
					passed = s.send(t, b, key, step.tokens)
				}
				rpm, tpm := b.remaining(t, key)
				if passed != step.last || rpm != step.rpm || tpm != step.tpm {
					t.Fatalf("step %d: %d request(s) of %d tokens: last passed %v, free-rpm %d, free-tpm %d left; want %v, %d, %d",
						i, step.requests, step.tokens, passed, rpm, tpm, step.last, step.rpm, step.tpm)
				}
			}
		})
	}
}

// The README's fleet commands serve the built-in policy under every
// strategy: each of its limits is one every strategy can share.
func TestBuiltInPolicyServesEveryStrategy(t *testing.T) {
	set, err := loadPolicies("", reloadFlags{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range policy.Strategies() {
		if err := assemble.CheckStrategies(assemble.FleetConfig{Strategy: s, SampleOneIn: 10}, set); err != nil {
			t.Errorf("--strategy %s: %v", s, err)
		}
	}
}
