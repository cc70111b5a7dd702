package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ErrInvalidConfig is wrapped by Setup's error for a setting it cannot
// use; the message names the variable or field.
var ErrInvalidConfig = errors.New("tracing: invalid config")

// The protocols of OTLP that Setup exports with.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// DefaultServiceName is the service.name of Floodgate's spans when neither
// Config.ServiceName nor OTEL_SERVICE_NAME names one.
const DefaultServiceName = "floodgate"

// Config configures Setup beyond the environment. The zero value leaves
// everything to the standard OTEL_* variables.
type Config struct {
	// Endpoint, when set, turns tracing on and sends spans to this OTLP
	// endpoint, a URL such as http://collector:4317 (http: plaintext,
	// https: TLS), whatever OTEL_EXPORTER_OTLP_*ENDPOINT say: the
	// --otlp-endpoint flag. Like OTEL_EXPORTER_OTLP_ENDPOINT, it is a
	// base: over http/protobuf, spans go to its /v1/traces unless it has
	// a path of its own.
	Endpoint string
	// Protocol, when set, is the OTLP protocol, ProtocolGRPC or
	// ProtocolHTTP, instead of OTEL_EXPORTER_OTLP_TRACES_PROTOCOL and
	// OTEL_EXPORTER_OTLP_PROTOCOL.
	Protocol string
	// ServiceName is service.name unless OTEL_SERVICE_NAME (or
	// OTEL_RESOURCE_ATTRIBUTES) names it; "" means DefaultServiceName.
	ServiceName string
}

// Setup configures tracing from cfg and the standard variables of
// OpenTelemetry's SDK:
//
//	OTEL_SDK_DISABLED=true                  off
//	OTEL_TRACES_EXPORTER                    otlp (on), none (off), unset (on only with an endpoint); others are refused
//	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT      the endpoint; any of them, or Config.Endpoint, turns tracing on
//	OTEL_EXPORTER_OTLP_ENDPOINT
//	OTEL_EXPORTER_OTLP_TRACES_PROTOCOL      grpc or http/protobuf (the default, as the specification says)
//	OTEL_EXPORTER_OTLP_PROTOCOL
//	OTEL_SERVICE_NAME                       service.name (default floodgate)
//	OTEL_RESOURCE_ATTRIBUTES                more resource attributes
//	OTEL_TRACES_SAMPLER, _ARG               always_on, always_off, traceidratio, parentbased_always_on
//	                                        (the default), parentbased_always_off, parentbased_traceidratio;
//	                                        _ARG the ratio, in [0, 1], default 1
//
// and the exporters' own (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// _CERTIFICATE, _INSECURE, ...). A value it cannot use is an error that
// wraps ErrInvalidConfig and names the variable: tracing asked for and
// silently off would be worse.
//
// When tracing is on, Setup sets OpenTelemetry's global tracer provider
// and its global propagator (W3C trace context and baggage), so that
// otelhttp and otelgrpc continue the traces of incoming requests and New
// with no provider uses it, and returns the provider, enabled true, and a
// shutdown that flushes the spans still buffered (call it before exit).
// When it is off, it changes nothing and returns a no-op provider (on
// which an Observer costs next to nothing) and a shutdown that does
// nothing.
func Setup(ctx context.Context, cfg Config) (tp trace.TracerProvider, shutdown func(context.Context) error, enabled bool, err error) {
	off := noop.NewTracerProvider()
	nothing := func(context.Context) error { return nil }
	on, err := wanted(cfg)
	if err != nil || !on {
		return off, nothing, false, err
	}
	sampler, err := samplerFromEnv()
	if err != nil {
		return off, nothing, false, err
	}
	exp, err := exporter(ctx, cfg)
	if err != nil {
		return off, nothing, false, err
	}
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	// Later detectors win: the environment's service.name over ours.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", name)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return off, nothing, false, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME: %w", ErrInvalidConfig, err)
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	)
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return provider, provider.Shutdown, true, nil
}

// wanted reports whether cfg and the environment ask for tracing.
func wanted(cfg Config) (bool, error) {
	if v := os.Getenv("OTEL_SDK_DISABLED"); v != "" {
		disabled, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("%w: OTEL_SDK_DISABLED=%q: want true or false", ErrInvalidConfig, v)
		}
		if disabled {
			return false, nil
		}
	}
	explicit := false
	switch v := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); v {
	case "":
	case "none":
		return false, nil
	case "otlp":
		explicit = true
	default:
		return false, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: Floodgate exports traces with otlp (or none)", ErrInvalidConfig, v)
	}
	if cfg.Endpoint != "" {
		return true, checkEndpoint("the OTLP endpoint", cfg.Endpoint)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := os.Getenv(name); v != "" {
			return true, checkEndpoint(name, v)
		}
	}
	return explicit, nil
}

// checkEndpoint refuses an endpoint the exporters would fail on later,
// and silently.
func checkEndpoint(name, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: %s %q: want a URL such as http://collector:4317 (http: plaintext, https: TLS)", ErrInvalidConfig, name, v)
	}
	return nil
}

// protocol is the OTLP protocol cfg and the environment choose.
func protocol(cfg Config) (string, error) {
	name, v := "the OTLP protocol", cfg.Protocol
	for _, env := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v != "" {
			break
		}
		name, v = env, os.Getenv(env)
	}
	switch v {
	case "":
		return ProtocolHTTP, nil
	case ProtocolGRPC, ProtocolHTTP:
		return v, nil
	}
	return "", fmt.Errorf("%w: %s %q: want %s or %s", ErrInvalidConfig, name, v, ProtocolGRPC, ProtocolHTTP)
}

// exporter makes the OTLP exporter of cfg's protocol; it reads the rest
// of its settings from the environment itself.
func exporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	proto, err := protocol(cfg)
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	if proto == ProtocolGRPC {
		var opts []otlptracegrpc.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	} else {
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(tracesURL(cfg.Endpoint)))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter (%s): %w", proto, err)
	}
	return exp, nil
}

// tracesURL is the URL OTLP/HTTP posts spans to for an endpoint given as
// OTEL_EXPORTER_OTLP_ENDPOINT is, a base: with /v1/traces appended when
// it has no path of its own.
func tracesURL(endpoint string) string {
	u, err := url.Parse(endpoint) // checked by wanted
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and its _ARG name.
func samplerFromEnv() (sdktrace.Sampler, error) {
	name := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER"))
	ratio := func() (float64, error) {
		arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(r >= 0 && r <= 1) {
			return 0, fmt.Errorf("%w: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio in [0, 1] for %s", ErrInvalidConfig, arg, name)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("%w: OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", ErrInvalidConfig, name)
}
