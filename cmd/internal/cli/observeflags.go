package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/floodgate-io/floodgate/cmd/internal/assemble"
	"github.com/floodgate-io/floodgate/cmd/internal/observers"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/decisionlog"
	"github.com/floodgate-io/floodgate/observe/insight"
	"github.com/floodgate-io/floodgate/telemetry/tracing"
)

// observeFlags are what serve and the proxy report their decisions to:
// metrics, top consumers, decision logs and traces.
type observeFlags struct {
	nearLimit    float64
	insight      bool
	topK         int
	topWindow    time.Duration
	decisionLog  string
	sample       float64
	logRate      int64
	logKeys      string
	secretFile   string
	otlpEndpoint string
	fullRate     int
}

func (f *observeFlags) register(fl *pflag.FlagSet) {
	fl.Float64Var(&f.nearLimit, "near-limit-ratio", 0.8,
		"the share of its limit at or above which a key is near it: floodgate_near_limit_total and GET /admin/near-limit (envoyproxy/ratelimit's NEAR_LIMIT_RATIO)")
	fl.BoolVar(&f.insight, "insight", true,
		"follow the top consumers, near-limit keys and spikes of every policy (GET /admin/top, /admin/near-limit, /admin/events, /admin/stats and the live view /admin/ui/)")
	fl.IntVar(&f.topK, "top-k", insight.DefaultCounters,
		"counters per policy for the top consumers: the counts are exact to within the window's units divided by this")
	fl.DurationVar(&f.topWindow, "top-window", insight.DefaultWindow, "how far back the top consumers look (a whole number of seconds per sixth)")
	fl.StringVar(&f.decisionLog, "decision-log", "",
		"write a JSON line per denied, shadow-denied, errored or degraded decision for a SIEM: stderr, stdout or a file path (default: off)")
	fl.Float64Var(&f.sample, "decision-log-sample", 0, "with --decision-log: the fraction of allowed decisions logged too, 0 to 1")
	fl.Int64Var(&f.logRate, "decision-log-rate", decisionlog.DefaultRate,
		"with --decision-log: the most lines a second (bursts of twice that); the rest are counted in a summary line")
	fl.StringVar(&f.logKeys, "decision-log-keys", "hash", "with --decision-log: hash (key_hash, SHA-256 or with --decision-log-secret-file HMAC) or raw (the key itself)")
	fl.StringVar(&f.secretFile, "decision-log-secret-file", "",
		"with --decision-log: a file whose contents (at least 16 bytes) key the key hashes (HMAC-SHA-256), so that no one can recover a key from the log by hashing guesses; recommended")
	fl.StringVar(&f.otlpEndpoint, "otlp-endpoint", "",
		"trace decisions with OpenTelemetry and send the spans to this OTLP endpoint (http://collector:4318; the OTEL_* variables also turn tracing on)")
	fl.IntVar(&f.fullRate, "observe-full-rate", observe.DefaultFullRate,
		"decisions a second fully observed (latency histograms, top consumers); above it one in N is, N adapted, and the rest are counted without a clock read; 0 observes every decision fully")
}

// config is observers' Config from the flags.
func (f observeFlags) config(log *slog.Logger) (observers.Config, error) {
	cfg := observers.Config{
		Logger:         log,
		NearLimitRatio: f.nearLimit,
		NoInsight:      !f.insight,
		Insight:        insight.Options{Counters: f.topK, Window: f.topWindow},
		DecisionLog:    f.decisionLog,
		Tracing:        tracing.Config{Endpoint: f.otlpEndpoint},
		FullRate:       f.fullRate,
		TimeEvery:      f.fullRate == 0,
	}
	if f.fullRate < 0 {
		return cfg, fmt.Errorf("--observe-full-rate %d: want decisions a second, or 0 to observe every one fully", f.fullRate)
	}
	if f.nearLimit <= 0 || f.nearLimit > 1 {
		return cfg, fmt.Errorf("--near-limit-ratio %v: want a share in (0, 1]", f.nearLimit)
	}
	// insight reads 0 as its default: refused here, so that a 0 is not
	// silently replaced.
	if f.topK < 1 {
		return cfg, fmt.Errorf("--top-k %d: want at least 1 counter per policy", f.topK)
	}
	if f.topWindow <= 0 {
		return cfg, fmt.Errorf("--top-window %v: want a positive duration", f.topWindow)
	}
	if f.decisionLog == "" {
		switch {
		case f.sample != 0:
			return cfg, fmt.Errorf("--decision-log-sample needs --decision-log")
		case f.secretFile != "":
			return cfg, fmt.Errorf("--decision-log-secret-file needs --decision-log")
		}
		return cfg, nil
	}
	if f.sample < 0 || f.sample > 1 {
		return cfg, fmt.Errorf("--decision-log-sample %v: want a fraction from 0 to 1", f.sample)
	}
	if f.logRate < 1 { // decisionlog reads 0 as its default
		return cfg, fmt.Errorf("--decision-log-rate %d: want at least 1 line a second", f.logRate)
	}
	dl := decisionlog.Config{SampleAllowed: f.sample, Rate: f.logRate}
	switch f.logKeys {
	case "hash":
	case "raw":
		dl.RawKeys = true
	default:
		return cfg, fmt.Errorf("--decision-log-keys %q: want hash or raw", f.logKeys)
	}
	if f.secretFile != "" {
		secret, err := os.ReadFile(f.secretFile)
		if err != nil {
			return cfg, fmt.Errorf("--decision-log-secret-file: %w", err)
		}
		dl.Secret = []byte(strings.TrimRight(string(secret), "\r\n"))
		if len(dl.Secret) < decisionlog.MinSecretBytes {
			return cfg, fmt.Errorf("--decision-log-secret-file %s: %d bytes, want at least %d", f.secretFile, len(dl.Secret), decisionlog.MinSecretBytes)
		}
		if dl.RawKeys {
			return cfg, errors.New("--decision-log-keys raw logs the keys themselves, so --decision-log-secret-file would not be used: give one or the other")
		}
	}
	cfg.DecisionLogConfig = dl
	return cfg, nil
}

// openObservers assembles the observers of the flags.
func openObservers(ctx context.Context, f observeFlags, log *slog.Logger) (*observers.Set, error) {
	cfg, err := f.config(log)
	if err != nil {
		return nil, err
	}
	obs, err := observers.New(ctx, cfg)
	if err != nil {
		return nil, f.named(err)
	}
	return obs, nil
}

// named says which flags an error of observers.New is about: its
// packages name their own options, which the operator set by these flags.
func (f observeFlags) named(err error) error {
	var path *fs.PathError
	switch {
	case errors.Is(err, insight.ErrInvalidOption):
		return fmt.Errorf("--top-k %d, --top-window %v: %w", f.topK, f.topWindow, err)
	case errors.Is(err, tracing.ErrInvalidConfig) && f.otlpEndpoint != "":
		return fmt.Errorf("--otlp-endpoint %q or the OTEL_* variables: %w", f.otlpEndpoint, err)
	case errors.Is(err, decisionlog.ErrInvalidConfig), errors.As(err, &path) && path.Path == f.decisionLog:
		return fmt.Errorf("--decision-log %s: %w", f.decisionLog, err)
	}
	return err
}

// openObserved assembles the observers of the flags, then the stores of
// cfg with their Redis client traced when tracing is on; close closes
// both, the stores first.
func openObserved(ctx context.Context, f observeFlags, cfg assemble.Config, policies *policy.Set, log *slog.Logger) (*observers.Set, *assemble.Stores, func(), error) {
	obs, err := openObservers(ctx, f, log)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.WrapRedis = obs.WrapRedis()
	st, err := assemble.Open(ctx, cfg, policies, log)
	if err != nil {
		closeObservers(obs, log)
		return nil, nil, nil, err
	}
	return obs, st, func() { st.Close(); closeObservers(obs, log) }, nil
}

// closeObservers flushes the decision log and the spans, within a bound:
// the process is stopping.
func closeObservers(obs *observers.Set, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := obs.Close(ctx); err != nil {
		log.Warn("the decision log or the traces could not be flushed", "error", err)
	}
}

// statusOf is what GET /admin/status says of a server over st.
func statusOf(surface, configPath string, st *assemble.Stores) observers.Server {
	return observers.Server{Surface: surface, Version: versionString(), ConfigPath: policySource(configPath), Store: st.Name(),
		Breaker: func() string {
			if state, ok := st.Breaker(); ok {
				return state.String()
			}
			return ""
		}}
}

// watchBreaker shows the stores' breaker in the metrics and the events,
// until ctx is done; the memory store has none.
func watchBreaker(ctx context.Context, obs *observers.Set, st *assemble.Stores) {
	if _, ok := st.Breaker(); !ok {
		return
	}
	go obs.WatchBreaker(ctx, func() failover.BreakerState { s, _ := st.Breaker(); return s }, time.Second)
}
