// Package tracing puts Floodgate's decisions in OpenTelemetry traces.
//
// Observer is an observe.Spanner: each request's decision is a span named
// "floodgate.decision", a child of the span its context carries (the
// incoming request's, from otelhttp or otelgrpc), with one span event per
// limit decided; the Redis commands the decision sends are its children
// when the store's client is wrapped with WrapClient. Setup builds the
// tracer provider from the standard OTEL_* environment variables (or an
// explicit endpoint) and exports over OTLP; tracing is off unless they
// ask for it.
//
// The span's attributes:
//
//	floodgate.surface        serve, proxy, httplimit, grpclimit
//	floodgate.policy         the policy the request was decided under
//	floodgate.result         the request's outcome (allowed, denied, shadow_denied, shed, error)
//	floodgate.degraded       whether a failure policy decided for the store
//	floodgate.store_time_ms  time spent waiting for the store
//	floodgate.limits         how many limits applied
//
// and each "floodgate.limit" event's: floodgate.limit (the limit's name),
// floodgate.result, floodgate.remaining, floodgate.capacity (the
// decision's Limit), floodgate.cost, floodgate.retry_after_ms (denied),
// floodgate.degraded (when it was), and floodgate.key_hash (the first 16
// hex digits of the key's SHA-256) or, with Options.RawKeys,
// floodgate.key. A span with an Error outcome has status Error.
//
// This package is not a metrics or logging pipeline: those are
// telemetry/metrics and observe/decisionlog.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/floodgate-io/floodgate/observe"
)

// SpanName is the name of a decision's span; LimitEvent that of the span
// event of each limit decided.
const (
	SpanName   = "floodgate.decision"
	LimitEvent = "floodgate.limit"
)

// instrumentation is the tracer's name, as OpenTelemetry asks: the
// package that makes the spans.
const instrumentation = "github.com/floodgate-io/floodgate/telemetry/tracing"

// Options configure an Observer.
type Options struct {
	// TracerProvider makes the spans; nil means OpenTelemetry's global
	// provider (which Setup sets when tracing is on).
	TracerProvider trace.TracerProvider
	// RawKeys puts each limit's key in its span event as is
	// (floodgate.key) instead of a hash of it (floodgate.key_hash): keys
	// are often personal data (addresses, user ids), and a trace backend
	// is seldom the place for them.
	RawKeys bool
}

// Observer is an observe.Spanner that traces decisions. It is safe for
// concurrent use.
type Observer struct {
	tracer trace.Tracer
	off    bool // the provider is OpenTelemetry's no-op: Begin starts nothing
	raw    bool
}

// New returns an Observer.
func New(opts Options) *Observer {
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	_, off := tp.(noop.TracerProvider)
	return &Observer{tracer: tp.Tracer(instrumentation), off: off, raw: opts.RawKeys}
}

// Begin implements observe.Spanner: it starts the decision's span as a
// child of ctx's and returns a context that carries it.
func (o *Observer) Begin(ctx context.Context, surface, policy string) context.Context {
	if o.off {
		return ctx
	}
	ctx, span := o.tracer.Start(ctx, SpanName, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() { // a span sampled out is not worth the attributes' allocation
		span.SetAttributes(
			attribute.String("floodgate.surface", surface),
			attribute.String("floodgate.policy", policy),
		)
	}
	return ctx
}

// Observe implements observe.Observer: it adds the limit's event to the
// span of ctx, when that span is recording.
func (o *Observer) Observe(ctx context.Context, e observe.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs,
		attribute.String("floodgate.limit", e.Limit),
		attribute.String("floodgate.result", e.Outcome.String()),
		attribute.Int64("floodgate.remaining", e.Decision.Remaining),
		attribute.Int64("floodgate.capacity", e.Decision.Limit),
		attribute.Int64("floodgate.cost", e.Cost),
	)
	if o.raw {
		attrs = append(attrs, attribute.String("floodgate.key", e.Key))
	} else {
		attrs = append(attrs, attribute.String("floodgate.key_hash", observe.KeyHash(e.Key)))
	}
	if e.Outcome == observe.Denied {
		attrs = append(attrs, attribute.Int64("floodgate.retry_after_ms", e.Decision.RetryAfter.Milliseconds()))
	}
	if e.Degraded {
		attrs = append(attrs, attribute.Bool("floodgate.degraded", true))
	}
	span.AddEvent(LimitEvent, trace.WithAttributes(attrs...))
}

// End implements observe.Spanner: it sets the request's outcome on the
// span of ctx and ends it.
func (o *Observer) End(ctx context.Context, s observe.Summary) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || !ours(span) {
		return
	}
	span.SetAttributes(
		attribute.String("floodgate.result", s.Outcome.String()),
		attribute.Bool("floodgate.degraded", s.Degraded),
		attribute.Float64("floodgate.store_time_ms", float64(s.StoreTime.Microseconds())/1000),
		attribute.Int("floodgate.limits", s.Limits),
	)
	if s.Outcome == observe.Error {
		msg := "undecided"
		if s.Err != nil {
			span.RecordError(s.Err)
			msg = s.Err.Error()
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}

// ours reports whether span is a decision's span, so that End given a
// context that Begin did not return (a surface's slip) leaves the
// caller's span alone instead of ending it. The SDK's spans tell their
// name; a span of another implementation is taken as ours.
func ours(span trace.Span) bool {
	named, ok := span.(interface{ Name() string })
	return !ok || named.Name() == SpanName
}
