// Package observers assembles what floodgate serve and floodgate proxy
// report their decisions to, from their flags: the Prometheus metrics
// (telemetry/metrics), the top consumers, near-limit keys, spikes and
// events (observe/insight), the decision log (observe/decisionlog) and the
// traces (telemetry/tracing), all behind one observe.Observer; and the
// operator's routes that show them: /metrics, /admin/top, /admin/near-limit,
// /admin/events, /admin/stats, /admin/status and the live view /admin/ui/.
package observers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/rueidis"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/decisionlog"
	"github.com/floodgate-io/floodgate/observe/insight"
	"github.com/floodgate-io/floodgate/telemetry/metrics"
	"github.com/floodgate-io/floodgate/telemetry/tracing"
)

// ErrInvalidConfig is wrapped by the errors of New about its Config.
var ErrInvalidConfig = errors.New("observers: invalid config")

// Config says what to report to.
type Config struct {
	// Logger receives the events (spikes, reloads, breaker changes) and
	// the observers' own errors.
	Logger *slog.Logger
	// NearLimitRatio is the share of a limit at or above which a decision
	// counts as near the limit, in the metrics and the near-limit list; 0
	// means 0.8.
	NearLimitRatio float64
	// NoInsight turns the top consumers, near-limit keys and spikes off
	// (their routes answer 404).
	NoInsight bool
	// Insight overrides insight's defaults (its Clock, NearLimitRatio and
	// OnEvent are set here).
	Insight insight.Options
	// DecisionLog is where decision records go: "" (off), "stderr",
	// "stdout" or a file path (appended to, created 0600).
	DecisionLog string
	// DecisionLogConfig configures the records (its Logger is made here).
	DecisionLogConfig decisionlog.Config
	// Tracing configures OpenTelemetry beyond the OTEL_* variables.
	Tracing tracing.Config
	// FullRate is how many decisions a second every surface together
	// times (observe.Sampler): below it every decision is fully observed;
	// above it one in N is, and the others are counted untimed (no
	// latency, not in the top consumers' sample). 0 means
	// observe.DefaultFullRate.
	FullRate int
	// TimeEvery times every decision, whatever the rate (FullRate is then
	// unused): exact latency histograms and top consumers, at the cost of
	// two clock reads and the observers' full work per decision.
	TimeEvery bool
}

// Set is the assembled observers. Close it when done.
type Set struct {
	// Observer is every observer below together.
	Observer observe.Observer
	// Metrics is the Prometheus observer; Registry holds its metrics and
	// the Go and process collectors.
	Metrics  *metrics.Observer
	Registry *prometheus.Registry
	// Insight is nil with NoInsight.
	Insight *insight.Insight
	// DecisionLog is nil without Config.DecisionLog.
	DecisionLog *decisionlog.Logger
	// Tracer is the tracer provider, nil unless tracing is on.
	Tracer trace.TracerProvider

	log     *slog.Logger
	closers []func(context.Context) error
	status  statusSource
	events  *prometheus.CounterVec // floodgate_events_total{kind}
	spiking *prometheus.GaugeVec   // floodgate_spike_active{policy, signal}
	kindsMu sync.Mutex
	kinds   map[string]bool // the kind labels handed out
}

// maxEventKinds bounds the kind label of floodgate_events_total: the kinds
// are the server's own, but a bound costs nothing.
const maxEventKinds = 32

// New assembles the observers of cfg.
func New(ctx context.Context, cfg Config) (*Set, error) {
	s := &Set{log: cfg.Logger, Registry: prometheus.NewRegistry()}
	now := time.Now()
	s.status.started = now
	s.status.loadedAt.Store(&now)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(s.Registry, metrics.Options{NearLimitRatio: cfg.NearLimitRatio})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	s.Metrics = m
	s.events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_events_total",
		Help: "Events (GET /admin/events): spike_start, spike_end, config_reload, config_reload_failed, breaker_open, breaker_half_open, breaker_closed.",
	}, []string{"kind"})
	s.spiking = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "floodgate_spike_active",
		Help: "1 while a policy's decisions or denials per second are in a spike above their baseline (see GET /admin/events), 0 after.",
	}, []string{"policy", "signal"})
	s.Registry.MustRegister(s.events, s.spiking)
	all := []observe.Observer{m}
	if !cfg.NoInsight {
		opts := cfg.Insight
		opts.NearLimitRatio = cfg.NearLimitRatio
		opts.OnEvent = s.onEvent
		if s.Insight, err = insight.New(opts); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		all = append(all, s.Insight)
	}
	if cfg.DecisionLog != "" {
		if err := s.openDecisionLog(cfg.DecisionLog, cfg.DecisionLogConfig); err != nil {
			s.Close(ctx)
			return nil, err
		}
		all = append(all, s.DecisionLog)
	}
	tp, shutdown, enabled, err := tracing.Setup(ctx, cfg.Tracing)
	if err != nil {
		s.Close(ctx)
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if enabled {
		s.Tracer = tp
		s.closers = append(s.closers, shutdown)
		all = append(all, tracing.New(tracing.Options{TracerProvider: tp}))
	}
	var sampler *observe.Sampler // nil: every decision timed
	if !cfg.TimeEvery {
		if sampler, err = observe.NewSampler(observe.SamplerOptions{FullRate: cmp.Or(cfg.FullRate, observe.DefaultFullRate)}); err != nil {
			s.Close(ctx)
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	s.Observer = observe.Sample(observe.Multi(all...), sampler)
	return s, nil
}

// openDecisionLog starts the decision log on dest.
func (s *Set) openDecisionLog(dest string, cfg decisionlog.Config) error {
	var w io.Writer
	switch dest {
	case "stderr":
		w = os.Stderr
	case "stdout":
		w = os.Stdout
	default:
		f, err := os.OpenFile(dest, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("%w: decision log: %w", ErrInvalidConfig, err)
		}
		s.closers = append(s.closers, func(context.Context) error { return f.Close() })
		w = f
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l, err := decisionlog.New(cfg)
	if err != nil {
		return fmt.Errorf("%w: decision log: %w", ErrInvalidConfig, err)
	}
	s.DecisionLog = l
	// Flushed first: its summary of what it suppressed goes out before
	// the file closes.
	s.closers = append([]func(context.Context) error{l.Flush}, s.closers...)
	return nil
}

// Close writes what the decision log still holds, stops tracing (sending
// the spans it holds, within ctx) and closes the decision log's file.
func (s *Set) Close(ctx context.Context) error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c(ctx))
	}
	s.closers = nil
	return errors.Join(errs...)
}

// Record notes an event of the server's (a reload, a breaker change) in
// the events and the log.
func (s *Set) Record(kind, msg string, fields map[string]any) {
	if s.Insight == nil {
		s.onEvent(insight.EventRecord{Time: time.Now(), Event: insight.Event{Kind: kind, Message: msg, Fields: fields}})
		return
	}
	if err := s.Insight.Record(insight.Event{Kind: kind, Message: msg, Fields: fields}); err != nil {
		s.log.Warn("observers: an event was not recorded", "kind", kind, "error", err)
	}
}

// onEvent logs an event insight recorded (or would have) and counts it;
// a spike also sets floodgate_spike_active. Insight bounds the policies it
// names, so the gauge's labels are bounded too.
func (s *Set) onEvent(e insight.EventRecord) {
	if s.knownKind(e.Kind) {
		s.events.WithLabelValues(e.Kind).Inc()
	}
	if signal, ok := e.Fields["signal"].(string); ok {
		switch e.Kind {
		case insight.KindSpikeStart:
			s.spiking.WithLabelValues(e.Policy, signal).Set(1)
		case insight.KindSpikeEnd:
			s.spiking.WithLabelValues(e.Policy, signal).Set(0)
		}
	}
	attrs := []any{"kind", e.Kind}
	if e.Policy != "" {
		attrs = append(attrs, "policy", e.Policy)
	}
	for k, v := range e.Fields {
		attrs = append(attrs, k, v)
	}
	s.log.Info(e.Message, attrs...)
}

// knownKind reports whether kind may be a label: one already seen, or a
// new one under maxEventKinds.
func (s *Set) knownKind(kind string) bool {
	s.kindsMu.Lock()
	defer s.kindsMu.Unlock()
	if s.kinds[kind] {
		return true
	}
	if len(s.kinds) >= maxEventKinds {
		return false
	}
	if s.kinds == nil {
		s.kinds = map[string]bool{}
	}
	s.kinds[kind] = true
	return true
}

// ConfigReload counts a reload of the policies and records it as an event.
func (s *Set) ConfigReload(ok bool) {
	s.Metrics.ConfigReload(ok)
	if ok {
		now := time.Now()
		s.status.loadedAt.Store(&now)
		s.Record("config_reload", "the policies were reloaded", nil)
		return
	}
	s.Record("config_reload_failed", "a reload of the policies failed; the previous ones stay in force", nil)
}

// WatchBreaker shows state in the breaker gauge and records an event each
// time it changes, polling every interval until ctx is done.
func (s *Set) WatchBreaker(ctx context.Context, state func() failover.BreakerState, interval time.Duration) {
	s.Metrics.WatchBreaker(state)
	last := state()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now := state(); now != last {
			s.Record("breaker_"+now.String(), fmt.Sprintf("the store's circuit breaker is %s (was %s)", now, last),
				map[string]any{"from": last.String(), "to": now.String()})
			last = now
		}
	}
}

// WrapHTTP traces the requests h serves when tracing is on.
func (s *Set) WrapHTTP(h http.Handler, operation string) http.Handler {
	if s.Tracer == nil {
		return h
	}
	return otelhttp.NewHandler(h, operation, otelhttp.WithTracerProvider(s.Tracer))
}

// GRPCOptions trace the calls a gRPC server serves when tracing is on.
func (s *Set) GRPCOptions() []grpc.ServerOption {
	if s.Tracer == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(s.Tracer)))}
}

// WrapRedis is the Redis client wrapper that makes its commands spans of
// the decision, when tracing is on; nil otherwise.
func (s *Set) WrapRedis() func(rueidis.Client) rueidis.Client {
	if s.Tracer == nil {
		return nil
	}
	return tracing.WrapClient(s.Tracer)
}
