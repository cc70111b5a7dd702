package decisionlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/monotime"
	"github.com/floodgate-io/floodgate/observe"
)

// The defaults of Config's zero fields.
const (
	// DefaultRate is records per second: every denial of ordinary traffic
	// (a few a second) is kept in full, while a flood of denials costs at
	// most about 40 KB/s of log (records are ~400 bytes).
	DefaultRate = 100
	// DefaultSummaryInterval is how often, at most, a summary of the
	// suppressed records is written: six lines a minute under a flood.
	DefaultSummaryInterval = 10 * time.Second
	// MinSecretBytes is the shortest Secret accepted: 128 bits, beyond
	// brute force.
	MinSecretBytes = 16
)

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("decisionlog: invalid config")

// Config configures New. Its zero value, with a Logger, is the
// recommended setup but for Secret.
type Config struct {
	// Logger writes the records; required. A slog.JSONHandler gives one
	// JSON object per line, as SIEMs ingest them. Its handler runs on the
	// request's goroutine: give it a buffered writer.
	Logger *slog.Logger

	// SampleAllowed is the fraction of allowed decisions that are logged,
	// from 0 (none, the default) to 1 (all). Degraded allowed decisions
	// are always logged.
	SampleAllowed float64

	// Secret, when set, keys key_hash: HMAC-SHA-256 under Secret instead
	// of plain SHA-256, so that a reader of the log cannot recover a key
	// from a small space (every IPv4 address is 2³² hashes away) by
	// hashing candidates. Recommended; at least MinSecretBytes bytes, the
	// same on every node whose logs are read together.
	Secret []byte

	// RawKeys logs the key itself, as "key", instead of key_hash. The key
	// is the caller's input: only for logs that are as private as the
	// requests themselves. Not with Secret.
	RawKeys bool

	// Rate is how many records per second the log writes at most, over
	// time (DefaultRate when 0); Burst how many at once (when 0, twice
	// Rate: two seconds' worth, so that the start of an incident is logged
	// record by record). Records beyond them are suppressed and counted in
	// a summary record. Sampled allowed decisions spend the same budget: keep
	// SampleAllowed times the allowed rate well below Rate. Negative values
	// are refused.
	Rate, Burst int64

	// SummaryInterval is the shortest time between two summaries of
	// suppressed records (DefaultSummaryInterval when 0). A summary is
	// written with the first record considered after the interval, or by
	// Flush.
	SummaryInterval time.Duration

	// Levels are the records' levels; nil fields take the defaults.
	Levels Levels

	// Clock gives the records' time and paces Rate; nil is the system
	// clock.
	Clock floodgate.Clock

	// Rand draws the allowed decisions' samples: a uniform uint64 per
	// allowed decision. Nil is math/rand/v2's generator, which is
	// per-thread in the runtime and so never contended; tests give a
	// seeded source. It must be safe for concurrent use when the Logger's
	// Observe is called concurrently.
	Rand func() uint64
}

// Levels are the records' levels, by result. A degraded decision is logged
// at the higher of its result's level and Degraded.
//
// The defaults follow nginx's limit_req_log_level, which logs rejections
// at "error" and delays one level lower, shifted down one: a denial is the
// limiter doing its job, not a fault of the server, so it is a warning;
// a shadow denial passed, so it is information. Shed requests and records
// lost to the log's own rate limit are warnings, undecided requests
// errors.
type Levels struct {
	Allowed      slog.Leveler // default slog.LevelInfo
	Denied       slog.Leveler // default slog.LevelWarn
	ShadowDenied slog.Leveler // default slog.LevelInfo
	Shed         slog.Leveler // default slog.LevelWarn
	Error        slog.Leveler // default slog.LevelError; also for an unknown outcome
	Degraded     slog.Leveler // default slog.LevelWarn
	Suppressed   slog.Leveler // the summary record; default slog.LevelWarn
}

// Logger is an observe.Observer that logs decisions. It is safe for
// concurrent use.
type Logger struct {
	h        slog.Handler
	levels   [outcomes]slog.Leveler // by outcomeIndex
	degraded slog.Leveler
	summary  slog.Leveler

	sampleAll bool
	threshold uint64 // an allowed decision is sampled when rand() < threshold
	rand      func() uint64

	raw    bool
	hashes *hasher
	clock  floodgate.Clock // nil: the system clock, read as mono
	mono   monotime.Micros // as a floodgate.Memory without a clock reads time
	budget budget
}

// New returns a Logger, or an error wrapping ErrInvalidConfig that names
// the field at fault.
func New(cfg Config) (*Logger, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	l := &Logger{
		h:        cfg.Logger.Handler(),
		degraded: cfg.Levels.Degraded,
		summary:  cfg.Levels.Suppressed,
		rand:     cfg.Rand,
		raw:      cfg.RawKeys,
		hashes:   newHasher(cfg.Secret),
		clock:    cfg.Clock,
		mono:     monotime.New(),
	}
	l.levels = [outcomes]slog.Leveler{
		cfg.Levels.Error, cfg.Levels.Allowed, cfg.Levels.Denied,
		cfg.Levels.ShadowDenied, cfg.Levels.Shed, cfg.Levels.Error,
	}
	l.sampleAll, l.threshold = sampling(cfg.SampleAllowed)
	if err := l.budget.init(cfg.Clock, l.micros(), cfg.Rate, cfg.Burst, cfg.SummaryInterval); err != nil {
		return nil, err
	}
	return l, nil
}

func (c *Config) validate() error {
	switch {
	case c.Logger == nil:
		return fmt.Errorf("%w: Logger is required", ErrInvalidConfig)
	case math.IsNaN(c.SampleAllowed) || c.SampleAllowed < 0 || c.SampleAllowed > 1:
		return fmt.Errorf("%w: SampleAllowed must be between 0 and 1, got %v", ErrInvalidConfig, c.SampleAllowed)
	case len(c.Secret) > 0 && len(c.Secret) < MinSecretBytes:
		return fmt.Errorf("%w: Secret must be at least %d bytes, got %d", ErrInvalidConfig, MinSecretBytes, len(c.Secret))
	case len(c.Secret) > 0 && c.RawKeys:
		return fmt.Errorf("%w: RawKeys logs keys unhashed, so a Secret would not be used: set one or the other", ErrInvalidConfig)
	case c.Rate < 0:
		return fmt.Errorf("%w: Rate must not be negative, got %d", ErrInvalidConfig, c.Rate)
	case c.Burst < 0:
		return fmt.Errorf("%w: Burst must not be negative, got %d", ErrInvalidConfig, c.Burst)
	case c.SummaryInterval < 0:
		return fmt.Errorf("%w: SummaryInterval must not be negative, got %s", ErrInvalidConfig, c.SummaryInterval)
	}
	return nil
}

func (c *Config) defaults() {
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.Burst == 0 {
		c.Burst = max(2*c.Rate, c.Rate) // Rate itself if doubling overflows: then Validate names Rate
	}
	if c.SummaryInterval == 0 {
		c.SummaryInterval = DefaultSummaryInterval
	}
	if c.Rand == nil {
		c.Rand = rand.Uint64
	}
	lv := &c.Levels
	for _, f := range []struct {
		field *slog.Leveler
		def   slog.Level
	}{
		{&lv.Allowed, slog.LevelInfo}, {&lv.Denied, slog.LevelWarn}, {&lv.ShadowDenied, slog.LevelInfo},
		{&lv.Shed, slog.LevelWarn}, {&lv.Error, slog.LevelError}, {&lv.Degraded, slog.LevelWarn},
		{&lv.Suppressed, slog.LevelWarn},
	} {
		if *f.field == nil {
			*f.field = f.def
		}
	}
}

// sampling turns a fraction into a threshold on a uniform uint64; all is
// true when every draw passes (f = 1, which no uint64 threshold says).
func sampling(f float64) (all bool, threshold uint64) {
	t := math.Ldexp(f, 64)
	if t >= math.Ldexp(1, 64) {
		return true, 0
	}
	return false, uint64(t)
}

// micros is the time in µs since the Unix epoch that paces the log.
func (l *Logger) micros() int64 {
	if l.clock != nil {
		return l.clock.Now().UnixMicro()
	}
	return l.mono.Now()
}

// wallTime is a record's time: Config.Clock's, or the wall clock's.
func (l *Logger) wallTime() time.Time {
	if l.clock != nil {
		return l.clock.Now()
	}
	return time.Now()
}

// Observe logs e if its result calls for a record, the allowed ones when
// sampled, and the log's rate limit lets it through; it counts it as
// suppressed otherwise. A decision that is not logged costs no allocation.
func (l *Logger) Observe(ctx context.Context, e observe.Event) {
	i := outcomeIndex(e.Outcome)
	if i == allowedIndex && !e.Degraded && !l.sampled() {
		return
	}
	level := l.levels[i].Level()
	if e.Degraded {
		level = max(level, l.degraded.Level())
	}
	if !l.h.Enabled(ctx, level) {
		return
	}
	us := l.micros()
	l.summarizeDue(ctx, us)
	if !l.budget.take(us) {
		l.budget.suppress(i)
		return
	}
	_ = l.h.Handle(ctx, l.record(l.wallTime(), level, &e)) // as slog.Logger does: nowhere to report it
}

func (l *Logger) sampled() bool {
	return l.sampleAll || (l.threshold != 0 && l.rand() < l.threshold)
}

// Flush writes the summary of the records suppressed since the last one,
// if any were, without waiting for the interval: before a process exits.
// It returns the handler's error.
func (l *Logger) Flush(ctx context.Context) error {
	if c, ok := l.budget.summary(l.micros(), true); ok {
		return l.writeSummary(ctx, c)
	}
	return nil
}

// summarizeDue writes the summary when one is due at us.
func (l *Logger) summarizeDue(ctx context.Context, us int64) {
	if c, ok := l.budget.summary(us, false); ok {
		_ = l.writeSummary(ctx, c)
	}
}

func (l *Logger) writeSummary(ctx context.Context, c suppressedCounts) error {
	if !l.h.Enabled(ctx, l.summary.Level()) {
		return nil
	}
	return l.h.Handle(ctx, l.summaryRecord(l.wallTime(), c))
}

// KeyHash is the key_hash this Logger writes for key: for finding a key's
// records in the log.
func (l *Logger) KeyHash(key string) string { return l.hashes.hash(key) }
