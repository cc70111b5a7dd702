package tracing_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/telemetry/tracing"
)

// otelVars are every variable Setup reads; each test starts with them
// unset, whatever the machine's environment says.
var otelVars = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
}

// setenv sets the OTEL_* variables to env and the rest to empty. (The
// globals Setup sets stay set after a test: OpenTelemetry cannot put its
// default back. The other tests pass their providers explicitly.)
func setenv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, v := range otelVars {
		t.Setenv(v, env[v])
	}
}

// Which settings turn tracing on, and which are refused with an error
// naming what is wrong.
func TestSetupReadsTheEnvironment(t *testing.T) {
	const ep = "http://127.0.0.1:4318"
	for _, c := range []struct {
		name    string
		env     map[string]string
		cfg     tracing.Config
		enabled bool
		errText string // the error names it; "" for no error
	}{
		{name: "nothing set: off"},
		{name: "an endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, enabled: true},
		{name: "a traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep + "/v1/traces"}, enabled: true},
		{name: "the flag's endpoint", cfg: tracing.Config{Endpoint: ep}, enabled: true},
		{name: "otlp asked for", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, enabled: true},
		{name: "exporter none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ep}},
		{name: "SDK disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": ep}},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, enabled: true},
		{name: "a ratio sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, enabled: true},

		{name: "unknown protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, errText: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "unknown traces protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, errText: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{name: "unknown config protocol", cfg: tracing.Config{Endpoint: ep, Protocol: "thrift"}, errText: "OTLP protocol"},
		{name: "unknown sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "jaeger_remote"}, errText: "OTEL_TRACES_SAMPLER"},
		{name: "ratio above 1", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, errText: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "ratio not a number", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"}, errText: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, errText: "OTEL_TRACES_EXPORTER"},
		{name: "endpoint without a scheme", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, errText: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{name: "flag endpoint without a scheme", cfg: tracing.Config{Endpoint: "collector:4317"}, errText: "OTLP endpoint"},
		{name: "SDK disabled not a bool", env: map[string]string{"OTEL_SDK_DISABLED": "maybe"}, errText: "OTEL_SDK_DISABLED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			setenv(t, c.env)
			tp, shutdown, enabled, err := tracing.Setup(context.Background(), c.cfg)
			if c.errText != "" {
				if !errors.Is(err, tracing.ErrInvalidConfig) || !strings.Contains(err.Error(), c.errText) {
					t.Fatalf("Setup = %v, want ErrInvalidConfig naming %s", err, c.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer shutdown(context.Background())
			if enabled != c.enabled || tp == nil {
				t.Fatalf("enabled %v (provider %v), want %v", enabled, tp, c.enabled)
			}
			if enabled && otel.GetTracerProvider() != tp {
				t.Error("tracing on, but the global provider is not Setup's")
			}
			if fields := otel.GetTextMapPropagator().Fields(); enabled && !strings.Contains(strings.Join(fields, ","), "traceparent") {
				t.Errorf("the global propagator reads %v, want traceparent among them", fields)
			}
		})
	}
}

// collector is an OTLP trace collector: it keeps the span names and the
// service names of what it receives.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	spans    []string
	services []string
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				c.services = append(c.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, s.GetName())
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// received returns what the collector has received so far.
func (c *collector) received() (spans, services []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.spans...), append([]string(nil), c.services...)
}

// serveGRPC runs c as an OTLP/gRPC collector on 127.0.0.1 and returns its
// endpoint URL.
func serveGRPC(t *testing.T, c *collector) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, c)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return "http://" + ln.Addr().String()
}

// serveHTTP runs c as an OTLP/HTTP collector (protobuf bodies on
// /v1/traces) on 127.0.0.1 and returns its endpoint URL.
func serveHTTP(t *testing.T, c *collector) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &collectortrace.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(body, req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		resp, _ := c.Export(r.Context(), req)
		out, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Configured by the environment alone (or the flag), Setup's provider
// exports a decision's span to a real collector on 127.0.0.1, named by
// OTEL_SERVICE_NAME, by the time shutdown returns.
func TestSetupExportsToACollector(t *testing.T) {
	for _, c := range []struct {
		name  string
		serve func(*testing.T, *collector) string
		env   func(endpoint string) map[string]string
		cfg   func(endpoint string) tracing.Config
	}{
		{"OTLP/gRPC from the environment", serveGRPC, func(ep string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_SERVICE_NAME": "edge-limiter"}
		}, func(string) tracing.Config { return tracing.Config{} }},
		{"OTLP/HTTP from the flag", serveHTTP, func(string) map[string]string {
			return map[string]string{"OTEL_SERVICE_NAME": "edge-limiter"}
		}, func(ep string) tracing.Config { return tracing.Config{Endpoint: ep, Protocol: tracing.ProtocolHTTP} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			col := &collector{}
			ep := c.serve(t, col)
			setenv(t, c.env(ep))
			tp, shutdown, enabled, err := tracing.Setup(context.Background(), c.cfg(ep))
			if err != nil || !enabled {
				t.Fatalf("Setup: enabled %v, %v", enabled, err)
			}
			obs := tracing.New(tracing.Options{TracerProvider: tp})
			ctx := obs.Begin(context.Background(), observe.SurfaceServe, "api")
			obs.End(ctx, observe.Summary{Policy: "api", Outcome: observe.Allowed})
			if err := shutdown(context.Background()); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			spans, services := col.received()
			if len(spans) != 1 || spans[0] != tracing.SpanName {
				t.Fatalf("the collector received spans %v, want [%s]", spans, tracing.SpanName)
			}
			if len(services) != 1 || services[0] != "edge-limiter" {
				t.Fatalf("service.name %v, want OTEL_SERVICE_NAME's edge-limiter", services)
			}
		})
	}
}
