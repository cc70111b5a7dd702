package tracing_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/redisstore"
	"github.com/floodgate-io/floodgate/telemetry/tracing"
)

// recorded returns a provider that samples every span into an in-memory
// exporter, synchronously: what a test reads is all there is.
func recorded(t testing.TB) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

func find(spans tracetest.SpanStubs, name string) (tracetest.SpanStub, bool) {
	for _, s := range spans {
		if s.Name == name {
			return s, true
		}
	}
	return tracetest.SpanStub{}, false
}

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// The caller's trace, received in a traceparent header by otelhttp on a
// real listener, goes on in the decision's span, which carries the
// request's outcome and an event per limit.
func TestDecisionSpanContinuesTheIncomingTrace(t *testing.T) {
	tp, exp := recorded(t)
	obs := tracing.New(tracing.Options{TracerProvider: tp})
	limit := floodgate.PerMinute(10)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := obs.Begin(r.Context(), observe.SurfaceHTTP, "api")
		obs.Observe(ctx, observe.Event{Surface: observe.SurfaceHTTP, Policy: "api", Limit: "per-user", Key: "user-42",
			Outcome: observe.Allowed, Cost: 1, Decision: floodgate.Decision{Allowed: true, Limit: 10, Remaining: 9}})
		obs.Observe(ctx, observe.Event{Surface: observe.SurfaceHTTP, Policy: "api", Limit: "per-tenant", Key: "acme",
			Outcome: observe.Denied, Cost: 1, Decision: floodgate.Decision{Limit: limit.Rate, RetryAfter: 1500 * time.Millisecond}})
		obs.End(ctx, observe.Summary{Policy: "api", Outcome: observe.Denied, Limits: 2, Latency: time.Millisecond, StoreTime: 250 * time.Microsecond})
		w.WriteHeader(http.StatusTooManyRequests)
	})
	srv := httptest.NewServer(otelhttp.NewHandler(handler, "GET /",
		otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{})))
	defer srv.Close()

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.Close() // the server span has ended once its handler has returned

	spans := exp.GetSpans()
	var server tracetest.SpanStub
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindServer {
			server = s
		}
	}
	if !server.SpanContext.IsValid() {
		t.Fatalf("no server span among %v", names(spans))
	}
	decision, ok := find(spans, tracing.SpanName)
	if !ok {
		t.Fatalf("no %s span among %d spans", tracing.SpanName, len(spans))
	}
	if got := server.Parent.SpanID().String(); got != parentID || server.SpanContext.TraceID().String() != traceID {
		t.Errorf("the server span is in trace %s under %s, want %s under %s (the traceparent)", server.SpanContext.TraceID(), got, traceID, parentID)
	}
	if decision.Parent.SpanID() != server.SpanContext.SpanID() || decision.SpanContext.TraceID().String() != traceID {
		t.Errorf("the decision span's parent is %s, want the server span %s", decision.Parent.SpanID(), server.SpanContext.SpanID())
	}
	got := attrs(decision.Attributes)
	for k, want := range map[attribute.Key]attribute.Value{
		"floodgate.surface":       attribute.StringValue("httplimit"),
		"floodgate.policy":        attribute.StringValue("api"),
		"floodgate.result":        attribute.StringValue("denied"),
		"floodgate.degraded":      attribute.BoolValue(false),
		"floodgate.store_time_ms": attribute.Float64Value(0.25),
		"floodgate.limits":        attribute.IntValue(2),
	} {
		if got[k] != want {
			t.Errorf("span attribute %s = %v, want %v", k, got[k].String(), want.String())
		}
	}
	if decision.Status.Code == codes.Error {
		t.Error("a denial marked as an error")
	}
	if len(decision.Events) != 2 {
		t.Fatalf("%d span events, want one per limit (2)", len(decision.Events))
	}
	for i, want := range []map[attribute.Key]attribute.Value{{
		"floodgate.limit": attribute.StringValue("per-user"), "floodgate.result": attribute.StringValue("allowed"),
		"floodgate.remaining": attribute.Int64Value(9), "floodgate.capacity": attribute.Int64Value(10),
		"floodgate.cost": attribute.Int64Value(1), "floodgate.key_hash": attribute.StringValue(observe.KeyHash("user-42")),
	}, {
		"floodgate.limit": attribute.StringValue("per-tenant"), "floodgate.result": attribute.StringValue("denied"),
		"floodgate.retry_after_ms": attribute.Int64Value(1500), "floodgate.key_hash": attribute.StringValue(observe.KeyHash("acme")),
	}} {
		ev := decision.Events[i]
		if ev.Name != tracing.LimitEvent {
			t.Errorf("event %d is %q, want %q", i, ev.Name, tracing.LimitEvent)
		}
		got := attrs(ev.Attributes)
		for k, w := range want {
			if got[k] != w {
				t.Errorf("event %d: %s = %v, want %v", i, k, got[k].String(), w.String())
			}
		}
		if _, raw := got["floodgate.key"]; raw {
			t.Errorf("event %d shows the raw key without Options.RawKeys", i)
		}
	}
}

// An undecided request's span has status Error and records the error; the
// raw key is shown only when asked.
func TestErrorAndRawKey(t *testing.T) {
	tp, exp := recorded(t)
	obs := tracing.New(tracing.Options{TracerProvider: tp, RawKeys: true})
	cause := fmt.Errorf("redisstore: %w: connection refused", floodgate.ErrStoreUnavailable)
	ctx := obs.Begin(context.Background(), observe.SurfaceServe, "api")
	obs.Observe(ctx, observe.Event{Limit: "l", Key: "10.0.0.1", Outcome: observe.Error, Err: cause})
	obs.End(ctx, observe.Summary{Policy: "api", Outcome: observe.Error, Err: cause, Limits: 1})
	span, ok := find(exp.GetSpans(), tracing.SpanName)
	if !ok {
		t.Fatal("no decision span")
	}
	if span.Status.Code != codes.Error || span.Status.Description != cause.Error() {
		t.Errorf("status %v %q, want Error %q", span.Status.Code, span.Status.Description, cause)
	}
	if got := attrs(span.Events[0].Attributes)["floodgate.key"]; got.AsString() != "10.0.0.1" {
		t.Errorf("floodgate.key = %q with RawKeys, want the key", got.AsString())
	}
}

// End given a context that Begin did not return leaves the caller's span
// alone.
func TestEndLeavesOtherSpansAlone(t *testing.T) {
	tp, exp := recorded(t)
	obs := tracing.New(tracing.Options{TracerProvider: tp})
	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	obs.End(ctx, observe.Summary{Outcome: observe.Error})
	if len(exp.GetSpans()) != 0 {
		t.Fatal("End ended a span it did not begin")
	}
	caller.End()
	if s := exp.GetSpans(); len(s) != 1 || len(s[0].Attributes) != 0 {
		t.Fatalf("the caller's span was changed: %+v", s)
	}
}

// With the no-op provider (tracing off) and a context whose span does not
// record, the observer costs no allocation and starts nothing.
func TestOffCostsNothing(t *testing.T) {
	for name, ctx := range map[string]context.Context{
		"no span":              context.Background(),
		"a non-recording span": trace.ContextWithSpanContext(context.Background(), remoteParent()),
		"a no-op provider span": func() context.Context {
			c, _ := noop.NewTracerProvider().Tracer("x").Start(context.Background(), "s")
			return c
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			obs := tracing.New(tracing.Options{TracerProvider: noop.NewTracerProvider()})
			e := observe.Event{Limit: "l", Key: "k", Outcome: observe.Allowed}
			report := func() {
				c := obs.Begin(ctx, observe.SurfaceProxy, "api")
				if c != ctx {
					t.Fatal("Begin with tracing off returned a new context")
				}
				obs.Observe(c, e)
				obs.End(c, observe.Summary{Outcome: observe.Allowed})
			}
			if n := testing.AllocsPerRun(100, report); n != 0 {
				t.Fatalf("%v allocations per request with tracing off, want 0", n)
			}
		})
	}
}

func remoteParent() trace.SpanContext {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true})
}

// With the store's client wrapped, the Redis script call of a decision is
// a child span of the decision's, against a real redis-server.
func TestRedisCallsAreChildSpans(t *testing.T) {
	srv := testkit.StartServer(t)
	tp, exp := recorded(t)
	store, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, Timeout: 5 * time.Second, WrapClient: tracing.WrapClient(tp)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	obs := tracing.New(tracing.Options{TracerProvider: tp})

	ctx := obs.Begin(context.Background(), observe.SurfaceServe, "api")
	if _, err := store.AllowN(ctx, "user-42", floodgate.PerSecond(10), 1); err != nil {
		t.Fatal(err)
	}
	obs.End(ctx, observe.Summary{Policy: "api", Outcome: observe.Allowed, Limits: 1})

	spans := exp.GetSpans()
	decision, ok := find(spans, tracing.SpanName)
	if !ok {
		t.Fatalf("no decision span among %v", names(spans))
	}
	var calls []string
	for _, s := range spans {
		if s.Parent.SpanID() == decision.SpanContext.SpanID() {
			calls = append(calls, s.Name)
			if s.SpanKind != trace.SpanKindClient || attrs(s.Attributes)["db.system.name"].AsString() != "redis" {
				t.Errorf("span %s: kind %v, attributes %v: want a Redis client span", s.Name, s.SpanKind, s.Attributes)
			}
		}
	}
	// The script's first call may find it not loaded: EVALSHA, then EVAL.
	if len(calls) == 0 || calls[0] != "EVALSHA" {
		t.Fatalf("the decision span's children are %v, want the EVALSHA call first; all spans: %v", calls, names(spans))
	}
}

// A command whose context has no recording span is sent untraced.
func TestRedisCallsOutsideATraceAreNotSpans(t *testing.T) {
	srv := testkit.StartServer(t)
	tp, exp := recorded(t)
	store, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, Timeout: 5 * time.Second, WrapClient: tracing.WrapClient(tp)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.AllowN(context.Background(), "k", floodgate.PerSecond(10), 1); err != nil {
		t.Fatal(err)
	}
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Fatalf("spans without a trace: %v", names(spans))
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

var sink context.Context

// BenchmarkRequest is a request of one limit as a surface reports it:
// Begin, Observe, End.
func BenchmarkRequest(b *testing.B) {
	e := observe.Event{Surface: observe.SurfaceProxy, Policy: "api", Limit: "per-user", Key: "user-42",
		Outcome: observe.Allowed, Cost: 1, Decision: floodgate.Decision{Allowed: true, Limit: 10, Remaining: 9}}
	sum := observe.Summary{Policy: "api", Outcome: observe.Allowed, Limits: 1, Latency: time.Millisecond}
	run := func(b *testing.B, obs *tracing.Observer) {
		b.ReportAllocs()
		for b.Loop() {
			ctx := obs.Begin(context.Background(), observe.SurfaceProxy, "api")
			obs.Observe(ctx, e)
			obs.End(ctx, sum)
			sink = ctx
		}
	}
	b.Run("off", func(b *testing.B) { run(b, tracing.New(tracing.Options{TracerProvider: noop.NewTracerProvider()})) })
	b.Run("sampled_out", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
		run(b, tracing.New(tracing.Options{TracerProvider: tp}))
	})
	b.Run("on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(discard{}))
		run(b, tracing.New(tracing.Options{TracerProvider: tp}))
	})
}

// discard is a span processor that drops every span: the benchmark
// measures making the spans, not exporting them.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }
