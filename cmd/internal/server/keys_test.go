package server_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/server"
	"github.com/floodgate-io/floodgate/internal/excerpt"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/redisstore"
)

// maxRefusalBytes bounds a refusal's body or message: it names the limit
// and the size and quotes an excerpt of the input, never the input.
const maxRefusalBytes = 400

// Every surface of the service holds keys, descriptor keys and values and
// domains to the key-size policy: a megabyte of input gets a 400 (or
// InvalidArgument) of a few hundred bytes that names the limit, and
// nothing is stored.
func TestKeyPolicyOnEverySurface(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		h := newHarness(t, setup{opts: func(o *server.Options) { o.MaxBodyBytes = 4 << 20 }})
		checkKeyPolicy(t, h, h.mem.Len)
	})
	t.Run("redis", func(t *testing.T) {
		srv := testkit.StartServer(t)
		store, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(store.Close)
		h := newHarness(t, setup{store: store, opts: func(o *server.Options) {
			o.MaxBodyBytes, o.Limiter = 4<<20, store
		}})
		checkKeyPolicy(t, h, func() int {
			n, _ := strconv.Atoi(srv.Do(t, "DBSIZE"))
			return n
		})
	})
}

func checkKeyPolicy(t *testing.T, h *harness, stored func() int) {
	mb := strings.Repeat("v", 1<<20)
	limit := `"limit":{"algorithm":"token_bucket","rate":1,"period":"1h"}`
	lookupOf := func(domain, key, value string) string {
		return `{"domain":"` + domain + `","descriptors":[{"entries":[{"key":"` + key + `","value":"` + value + `"}]}]`
	}
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"explicit key", "/v1/allow", `{"key":"` + mb + `",` + limit + `}`, "key"},
		{"descriptor value", "/v1/allow", lookupOf("api", "user", mb) + `}`, "descriptors[0].entries[0]: value"},
		{"descriptor key", "/v1/allow", lookupOf("api", mb, "x") + `}`, "descriptors[0].entries[0]: key"},
		{"domain", "/v1/allow", lookupOf(mb, "user", "x") + `}`, "domain"},
		{"adjusted value", "/v1/adjust", lookupOf("api", "user", mb) + `,"cost":1}`, "descriptors[0].entries[0]: value"},
		{"Envoy JSON value", "/json", lookupOf("api", "user", mb) + `}`, "descriptors[0]: entries[0]: value"},
		{"Envoy JSON domain", "/json", lookupOf(mb, "user", "x") + `}`, "domain"},
		{"inspected key", "/admin/inspect", `{"key":"` + mb + `",` + limit + `}`, "key"},
		{"reset store key", "/admin/reset", `{"key":"` + mb + `"}`, "key"},
		{"reset explicit key", "/admin/reset", `{"explicit_key":"` + mb + `"}`, "explicit_key"},
		{"reset lookup", "/admin/reset", lookupOf("api", "user", mb) + `}`, "descriptors[0].entries[0]: value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", tc.path, tc.body, "Content-Type", "application/json", "Authorization", "Bearer s3cret")
			if r.status != 400 || len(r.body) > maxRefusalBytes {
				t.Fatalf("%d with a body of %d bytes (%.200s), want 400 with at most %d", r.status, len(r.body), r.body, maxRefusalBytes)
			}
			msg, _ := r.json(t)["error"].(string)
			if !strings.Contains(msg, tc.want+` "vvvv`) || !strings.Contains(msg, "(1048576 bytes) is longer than") {
				t.Fatalf("error %q does not name %s, the size and the limit", msg, tc.want)
			}
		})
	}
	if n := stored(); n != 0 {
		t.Fatalf("refused requests left %d keys in the store", n)
	}
}

func TestKeyPolicyOverGRPC(t *testing.T) {
	h := newHarness(t, setup{opts: func(o *server.Options) { o.MaxBodyBytes = 4 << 20 }})
	mb := strings.Repeat("v", 1<<20)
	atMax := strings.Repeat("v", floodgate.MaxValueBytes)
	domain := rreq(rdesc("user", "x"))
	domain.Domain = mb
	for _, tc := range []struct {
		name, want string
		req        *rlsv3.RateLimitRequest
	}{
		{"value", "descriptors[1]: entries[0]: value", rreq(rdesc("user", "x"), rdesc("user", mb))},
		{"key", "descriptors[0]: entries[1]: key", rreq(rdesc("user", "x", mb, "y"))},
		{"domain", "domain", domain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.rls.ShouldRateLimit(context.Background(), tc.req)
			st := status.Convert(err)
			switch {
			case st.Code() != codes.InvalidArgument:
				t.Fatalf("code %v (%.200s), want InvalidArgument", st.Code(), st.Message())
			case len(st.Message()) > maxRefusalBytes:
				t.Fatalf("a message of %d bytes echoes the input", len(st.Message()))
			case !strings.Contains(st.Message(), tc.want+` "vvvv`) || !strings.Contains(st.Message(), "(1048576 bytes) is longer than 1024 bytes"):
				t.Fatalf("message %q does not name %s, the size and the limit", st.Message(), tc.want)
			}
		})
	}
	if resp := h.should(rreq(rdesc("user", atMax))); resp.OverallCode != OK {
		t.Fatalf("a value of the maximum length: %v", resp)
	}
}

// What the JSON decoders say about a body quotes parts of it (an unknown
// field's name, a token that is not a number); a megabyte there still gets
// a refusal of a few hundred bytes.
func TestDecoderErrorsDoNotEchoTheBody(t *testing.T) {
	h := newHarness(t, setup{opts: func(o *server.Options) { o.MaxBodyBytes = 4 << 20 }})
	mb := strings.Repeat("v", 1<<20)
	for _, tc := range []struct{ name, path, body string }{
		{"unknown field", "/v1/allow", `{"` + mb + `":1}`},
		{"Envoy JSON unknown field", "/json", `{"` + mb + `":1}`},
		{"Envoy JSON enum", "/json", `{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],"limit":{"requests_per_unit":1,"unit":"` + mb + `"}}]}`},
		{"Envoy JSON number", "/json", `{"domain":"d","hits_addend":` + strings.Repeat("9", 1<<20) + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", tc.path, tc.body, "Content-Type", "application/json")
			if most := excerpt.MessageBytes + 64; r.status != 400 || len(r.body) > most {
				t.Fatalf("%d with a body of %d bytes (%.200s), want 400 with at most %d", r.status, len(r.body), r.body, most)
			}
		})
	}
}
