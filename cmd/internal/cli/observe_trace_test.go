package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate-io/floodgate/internal/testkit"
)

// otlpCollector is an OTLP/HTTP trace collector on 127.0.0.1: it keeps
// every span it is sent (protobuf bodies POSTed to /v1/traces).
type otlpCollector struct {
	URL   string
	mu    sync.Mutex
	spans []*tracepb.Span
}

func startCollector(t *testing.T) *otlpCollector {
	t.Helper()
	c := &otlpCollector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &collectortrace.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(body, req)
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				c.spans = append(c.spans, ss.GetSpans()...)
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// trace returns the spans received of the trace with id traceID.
func (c *otlpCollector) trace(traceID []byte) []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range c.spans {
		if bytes.Equal(s.GetTraceId(), traceID) {
			out = append(out, s)
		}
	}
	return out
}

// spanTree is one trace's spans, to look up parents and children.
type spanTree []*tracepb.Span

func (tr spanTree) named(name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range tr {
		if s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}

func (tr spanTree) parent(s *tracepb.Span) *tracepb.Span {
	for _, p := range tr {
		if bytes.Equal(p.GetSpanId(), s.GetParentSpanId()) {
			return p
		}
	}
	return nil
}

func stringAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func (tr spanTree) String() string {
	var b bytes.Buffer
	for _, s := range tr {
		if s == nil {
			b.WriteString("none\n")
			continue
		}
		b.WriteString(s.GetName() + " (" + s.GetKind().String() + ") " + hex.EncodeToString(s.GetSpanId()) + " parent " + hex.EncodeToString(s.GetParentSpanId()) + "\n")
	}
	return b.String()
}

// The caller's trace, as a W3C traceparent: its trace and span ids.
var (
	callerTrace, _ = hex.DecodeString("4bf92f3577b34da6a3ce929d0e0e4736")
	callerSpan, _  = hex.DecodeString("00f067aa0ba902b7")
	traceparent    = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// serve --otlp-endpoint traces every decision: a request that carries a
// W3C traceparent, over HTTP (otelhttp) or gRPC (otelgrpc), gets a
// "floodgate.decision" span in the caller's trace, a child of the
// server's span of the request, which is a child of the caller's; with
// --redis the script calls are children of the decision's span. Serve is
// stopped before the spans are read: stopping sends what it holds.
func TestServeTracesDecisions(t *testing.T) {
	redis := testkit.StartServer(t)
	for _, tc := range []struct {
		name     string
		args     []string
		ask      func(t *testing.T, httpAddr, grpcAddr string)
		server   string // the name otelhttp or otelgrpc gives the server's span of the request
		children []string
	}{
		{"HTTP", nil, allowTraced, "POST /v1/allow", nil},
		{"gRPC", nil, shouldRateLimitTraced, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", nil},
		{"HTTP with Redis", []string{"--redis", redis.Addr()}, allowTraced, "POST /v1/allow", []string{"EVALSHA"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			col := startCollector(t)
			args := append([]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
				"--config", writePolicy(t, shopPolicy), "--otlp-endpoint", col.URL}, tc.args...)
			m, logs, stop := startStoppable(t, listening, args)
			tc.ask(t, m[1], m[2])
			stop()

			tr := spanTree(col.trace(callerTrace))
			decisions := tr.named("floodgate.decision")
			if len(decisions) != 1 {
				t.Fatalf("%d floodgate.decision spans in the caller's trace, want 1; the trace:\n%v\nlogs:\n%s", len(decisions), tr, logs)
			}
			d := decisions[0]
			if p, r := stringAttr(d, "floodgate.policy"), stringAttr(d, "floodgate.result"); p != "shop" || r != "allowed" {
				t.Errorf("floodgate.policy %q, floodgate.result %q; want shop, allowed", p, r)
			}
			srv := tr.parent(d)
			if srv == nil || srv.GetName() != tc.server || srv.GetKind() != tracepb.Span_SPAN_KIND_SERVER || !bytes.Equal(srv.GetParentSpanId(), callerSpan) {
				t.Errorf("the decision's parent: %v, want the server span %q whose parent is the caller's span %x; the trace:\n%v", spanTree{srv}, tc.server, callerSpan, tr)
			}
			for _, name := range tc.children {
				found := false
				for _, c := range tr.named(name) {
					found = found || bytes.Equal(c.GetParentSpanId(), d.GetSpanId())
				}
				if !found {
					t.Errorf("no %s span under floodgate.decision; the trace:\n%v", name, tr)
				}
			}
		})
	}
}

// allowTraced sends one /v1/allow request of the shop policy with the
// caller's traceparent.
func allowTraced(t *testing.T, httpAddr, _ string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/v1/allow", bytes.NewBufferString(shopRequest("ann")))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/allow: %d", resp.StatusCode)
	}
}

// shouldRateLimitTraced sends one ShouldRateLimit of the shop policy with
// the caller's traceparent in its metadata.
func shouldRateLimitTraced(t *testing.T, _, grpcAddr string) {
	t.Helper()
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", traceparent)
	resp, err := pb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "shop",
		Descriptors: []*rlsv3.RateLimitDescriptor{{Entries: []*rlsv3.RateLimitDescriptor_Entry{{Key: "user", Value: "ann"}}}}})
	if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit: %v %v", resp, err)
	}
}
