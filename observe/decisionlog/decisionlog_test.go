package decisionlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/decisionlog"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// capture is a JSON log whose records the test reads back.
type capture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// records decodes and forgets the records written so far.
func (c *capture) records(t *testing.T) []map[string]any {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(c.buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("record %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	c.buf.Reset()
	return out
}

// newLog returns a Logger writing JSON at every level into a capture, on a
// manual clock, with cfg's other fields.
func newLog(t testing.TB, cfg decisionlog.Config) (*decisionlog.Logger, *capture, *floodgate.ManualClock) {
	t.Helper()
	c := &capture{}
	clock := floodgate.NewManualClock(start)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.Clock == nil {
		cfg.Clock = clock
	}
	l, err := decisionlog.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, c, clock
}

func event(o observe.Outcome) observe.Event {
	return observe.Event{
		Surface: observe.SurfaceHTTP, Policy: "api", Limit: "per_ip", Key: "192.0.2.1", Client: "192.0.2.1:4000",
		Outcome: o, Cost: 1, Decision: floodgate.Decision{Limit: 10, Remaining: 3},
	}
}

func TestWhichDecisionsAreLoggedAndAtWhichLevel(t *testing.T) {
	cases := []struct {
		name     string
		outcome  observe.Outcome
		degraded bool
		err      error
		level    string // "" when not logged
	}{
		{"allowed, not sampled", observe.Allowed, false, nil, ""},
		{"allowed, degraded", observe.Allowed, true, errors.New("store down"), "WARN"},
		{"denied", observe.Denied, false, nil, "WARN"},
		{"denied, degraded", observe.Denied, true, errors.New("store down"), "WARN"},
		{"shadow denied", observe.ShadowDenied, false, nil, "INFO"},
		{"shadow denied, degraded", observe.ShadowDenied, true, nil, "WARN"},
		{"shed", observe.Shed, false, nil, "WARN"},
		{"error", observe.Error, false, errors.New("bad descriptor"), "ERROR"},
		{"unknown outcome", observe.Outcome(0), false, nil, "ERROR"},
		{"outcome from a newer observe", observe.Outcome(200), false, nil, "ERROR"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, c, _ := newLog(t, decisionlog.Config{})
			e := event(tc.outcome)
			e.Degraded, e.Err = tc.degraded, tc.err
			l.Observe(context.Background(), e)
			recs := c.records(t)
			if tc.level == "" {
				if len(recs) != 0 {
					t.Fatalf("want no record, got %v", recs)
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("want one record, got %d: %v", len(recs), recs)
			}
			r := recs[0]
			if r["level"] != tc.level || r["result"] != tc.outcome.String() || r["degraded"] != tc.degraded {
				t.Errorf("got level %v result %v degraded %v, want %s %s %v",
					r["level"], r["result"], r["degraded"], tc.level, tc.outcome, tc.degraded)
			}
			if got, has := r["error"]; has != (tc.err != nil) || (tc.err != nil && got != tc.err.Error()) {
				t.Errorf("error field %v (present %v), want %v", got, has, tc.err)
			}
		})
	}
}

// The field set is the SIEM's contract: its names and their order change
// only with the package doc.
func TestFieldSetIsTheDocumentedOne(t *testing.T) {
	want := []string{"time", "level", "msg", "surface", "policy", "limit", "key_hash", "client", "result",
		"degraded", "remaining", "quota", "cost", "retry_after_ms", "retry_after", "reset_after_ms",
		"latency_us", "store_us", "error"}
	l, c, _ := newLog(t, decisionlog.Config{})
	e := event(observe.Error)
	e.Err = errors.New("boom")
	l.Observe(context.Background(), e)
	c.mu.Lock()
	line := c.buf.String()
	c.mu.Unlock()
	if got := jsonKeys(t, line); !slices.Equal(got, want) {
		t.Errorf("fields\n got %v\nwant %v", got, want)
	}
}

// jsonKeys lists a JSON object's top-level keys in order.
func jsonKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	var keys []string
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestDurationsAreRoundedUpAndNeverIsMinusOne(t *testing.T) {
	cases := []struct {
		retry, reset       time.Duration
		retryMS, retryS    float64
		resetMS, latencyUS float64
		latency, storeTime time.Duration
		storeUS            float64
	}{
		{retry: 0, reset: 0},
		{retry: time.Microsecond, reset: time.Millisecond, retryMS: 1, retryS: 1, resetMS: 1},
		{retry: 1500 * time.Millisecond, reset: 59*time.Second + time.Microsecond, retryMS: 1500, retryS: 2, resetMS: 59001},
		{retry: 2 * time.Second, reset: time.Hour, retryMS: 2000, retryS: 2, resetMS: 3_600_000},
		{retry: -1, reset: time.Second, retryMS: -1, retryS: -1, resetMS: 1000},
		{latency: 1999 * time.Nanosecond, latencyUS: 1, storeTime: 3 * time.Millisecond, storeUS: 3000},
	}
	for _, tc := range cases {
		l, c, _ := newLog(t, decisionlog.Config{})
		e := event(observe.Denied)
		e.Decision.RetryAfter, e.Decision.ResetAfter, e.Latency, e.StoreTime = tc.retry, tc.reset, tc.latency, tc.storeTime
		l.Observe(context.Background(), e)
		r := c.records(t)[0]
		got := []any{r["retry_after_ms"], r["retry_after"], r["reset_after_ms"], r["latency_us"], r["store_us"]}
		want := []any{tc.retryMS, tc.retryS, tc.resetMS, tc.latencyUS, tc.storeUS}
		if !slices.Equal(got, want) {
			t.Errorf("retry %s reset %s latency %s store %s: got %v, want %v", tc.retry, tc.reset, tc.latency, tc.storeTime, got, want)
		}
	}
}

// Sampling draws from Rand: with a seeded source the share of allowed
// decisions logged is within 5 standard deviations of the fraction
// (binomial, n draws), which a correct sampler misses with odds of about
// one in 1.7 million.
func TestSampleAllowedLogsThatFraction(t *testing.T) {
	const n = 100_000
	for _, f := range []float64{0, 0.001, 0.01, 0.1, 0.5, 0.9, 1} {
		counter := &countHandler{}
		src := rand.New(rand.NewPCG(1, 2))
		l, _, _ := newLog(t, decisionlog.Config{
			Logger: slog.New(counter), SampleAllowed: f, Rand: src.Uint64,
			Rate: n, Burst: n, // the log's own limit must not interfere
		})
		for range n {
			l.Observe(context.Background(), event(observe.Allowed))
		}
		got := float64(counter.n)
		mean, sd := n*f, math.Sqrt(n*f*(1-f))
		if math.Abs(got-mean) > 5*sd {
			t.Errorf("SampleAllowed %v: logged %v of %d, want %v ± %.0f", f, got, n, mean, 5*sd)
		}
	}
}

// countHandler counts the records it is given, at every level.
type countHandler struct {
	mu sync.Mutex
	n  int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(context.Context, slog.Record) error {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

func TestRateLimitBurstRefillAndSummary(t *testing.T) {
	l, c, clock := newLog(t, decisionlog.Config{Rate: 10, Burst: 20, SummaryInterval: 10 * time.Second})
	ctx := context.Background()
	flood := func(n int, o observe.Outcome) {
		for range n {
			l.Observe(ctx, event(o))
		}
	}
	type step struct {
		name    string
		advance time.Duration
		do      func()
		written int // decision records
		summary map[string]any
	}
	steps := []step{
		{name: "the burst passes, the rest of the flood is suppressed", do: func() { flood(100, observe.Denied) }, written: 20},
		{name: "100ms refills one record", advance: 100 * time.Millisecond, do: func() { flood(5, observe.Denied) }, written: 1},
		{name: "a second refills ten, of any result", advance: time.Second, do: func() { flood(8, observe.Shed); flood(8, observe.Error) }, written: 10},
		{
			name: "after the interval the next record brings the summary", advance: 9 * time.Second,
			do: func() { flood(1, observe.Denied) }, written: 1,
			summary: map[string]any{"msg": decisionlog.MsgSuppressed, "level": "WARN", "suppressed_total": 90.0, "interval_ms": 10100.0,
				"suppressed": map[string]any{"allowed": 0.0, "denied": 84.0, "shadow_denied": 0.0, "shed": 0.0, "error": 6.0}},
		},
		{name: "within the next interval, no second summary", advance: time.Second, do: func() { flood(30, observe.Denied) }, written: 20},
		{
			name: "Flush writes the summary before the interval is over", advance: time.Second,
			do: func() { _ = l.Flush(ctx) },
			summary: map[string]any{"msg": decisionlog.MsgSuppressed, "level": "WARN", "suppressed_total": 10.0, "interval_ms": 2000.0,
				"suppressed": map[string]any{"allowed": 0.0, "denied": 10.0, "shadow_denied": 0.0, "shed": 0.0, "error": 0.0}},
		},
		{name: "Flush with nothing suppressed writes nothing", do: func() { _ = l.Flush(ctx) }},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		s.do()
		recs := c.records(t)
		var summaries []map[string]any
		written := 0
		for _, r := range recs {
			if r["msg"] == decisionlog.MsgSuppressed {
				delete(r, "time")
				summaries = append(summaries, r)
			} else {
				written++
			}
		}
		if written != s.written {
			t.Errorf("%s: %d decision records written, want %d", s.name, written, s.written)
		}
		switch {
		case s.summary == nil && len(summaries) > 0:
			t.Errorf("%s: unexpected summary %v", s.name, summaries)
		case s.summary != nil && (len(summaries) != 1 || !jsonEqual(summaries[0], s.summary)):
			t.Errorf("%s: summaries %v, want one: %v", s.name, summaries, s.summary)
		case s.summary != nil && recs[0]["msg"] != decisionlog.MsgSuppressed:
			t.Errorf("%s: the summary must come before the record that brought it", s.name)
		}
	}
}

func jsonEqual(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// Every decision that should be logged is either written or counted in a
// summary, however many goroutines report at once.
func TestConcurrentRecordsAreWrittenOrCounted(t *testing.T) {
	counter := &summingHandler{}
	l, _, clock := newLog(t, decisionlog.Config{Logger: slog.New(counter), Rate: 50, Burst: 100})
	const goroutines, each = 8, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if i%500 == 0 && g == 0 {
					clock.Advance(time.Second)
				}
				l.Observe(context.Background(), event(observe.Denied))
			}
		})
	}
	wg.Wait()
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := counter.records + counter.suppressed; got != goroutines*each {
		t.Errorf("%d written + %d suppressed = %d, want %d", counter.records, counter.suppressed, got, goroutines*each)
	}
	if counter.records > 100+4*50 {
		t.Errorf("%d records written in 4s at 50/s with a burst of 100", counter.records)
	}
}

// summingHandler counts decision records and adds up the summaries'
// suppressed_total.
type summingHandler struct {
	mu                  sync.Mutex
	records, suppressed int64
}

func (h *summingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *summingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Message == decisionlog.MsgDecision {
		h.records++
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed_total" {
			h.suppressed += a.Value.Int64()
		}
		return true
	})
	return nil
}
func (h *summingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *summingHandler) WithGroup(string) slog.Handler      { return h }

func TestKeyHash(t *testing.T) {
	secret := []byte("0123456789abcdef")
	cases := []struct {
		name   string
		secret []byte
		key    string
		want   string
	}{
		// FIPS 180-2's "abc": SHA-256 ba7816bf8f01cfea414140de5dae2223...
		{"plain SHA-256", nil, "abc", "ba7816bf8f01cfea"},
		// RFC 4231 test case 2: HMAC-SHA-256 5bdcc146bf60754e6a042426...
		{"HMAC-SHA-256", []byte("Jefe"), "what do ya want for nothing?", "5bdcc146bf60754e"},
		{"keyed IPv4 address", secret, "192.0.2.1", decisionlog.KeyHash(secret, "192.0.2.1")},
	}
	for _, tc := range cases {
		if got := decisionlog.KeyHash(tc.secret, tc.key); got != tc.want {
			t.Errorf("%s: KeyHash(%q) = %s, want %s", tc.name, tc.key, got, tc.want)
		}
	}
	if decisionlog.KeyHash(secret, "192.0.2.1") == decisionlog.KeyHash(nil, "192.0.2.1") ||
		decisionlog.KeyHash(secret, "192.0.2.1") == decisionlog.KeyHash([]byte("another secret, 16+"), "192.0.2.1") {
		t.Error("a secret must change the hash")
	}

	l, c, _ := newLog(t, decisionlog.Config{Secret: secret})
	for range 3 { // the pooled HMACs are reset between records
		l.Observe(context.Background(), event(observe.Denied))
	}
	for _, r := range c.records(t) {
		if r["key_hash"] != decisionlog.KeyHash(secret, "192.0.2.1") || r["key"] != nil {
			t.Errorf("with Secret: key_hash %v key %v, want %s and no key", r["key_hash"], r["key"], decisionlog.KeyHash(secret, "192.0.2.1"))
		}
	}
	if l.KeyHash("192.0.2.1") != decisionlog.KeyHash(secret, "192.0.2.1") {
		t.Error("Logger.KeyHash differs from KeyHash with its secret")
	}
}

func TestRawKeysAndEmptyKeys(t *testing.T) {
	l, c, _ := newLog(t, decisionlog.Config{RawKeys: true})
	l.Observe(context.Background(), event(observe.Denied))
	if r := c.records(t)[0]; r["key"] != "192.0.2.1" || r["key_hash"] != nil {
		t.Errorf("RawKeys: key %v key_hash %v, want the key and no hash", r["key"], r["key_hash"])
	}
	l, c, _ = newLog(t, decisionlog.Config{})
	e := event(observe.Error)
	e.Key = ""
	l.Observe(context.Background(), e)
	if r := c.records(t)[0]; r["key_hash"] != "" {
		t.Errorf("no key: key_hash %v, want \"\" (not the hash of the empty string)", r["key_hash"])
	}
}

func TestLevelsAreOptionsAndFollowTheHandler(t *testing.T) {
	var lv slog.LevelVar
	lv.Set(slog.LevelDebug)
	l, c, _ := newLog(t, decisionlog.Config{Levels: decisionlog.Levels{Denied: &lv, Suppressed: slog.LevelError}, Rate: 1, Burst: 1})
	ctx := context.Background()
	l.Observe(ctx, event(observe.Denied))
	lv.Set(slog.LevelError)
	l.Observe(ctx, event(observe.Denied)) // suppressed
	_ = l.Flush(ctx)
	recs := c.records(t)
	if len(recs) != 2 || recs[0]["level"] != "DEBUG" || recs[1]["level"] != "ERROR" {
		t.Errorf("want a DEBUG decision then an ERROR summary, got %v", recs)
	}

	// A handler that would drop the record costs the log no token, and the
	// record is not counted as suppressed: the operator chose not to see it.
	quiet := &capture{}
	l, _, _ = newLog(t, decisionlog.Config{Logger: slog.New(slog.NewJSONHandler(quiet, &slog.HandlerOptions{Level: slog.LevelError})), Rate: 1, Burst: 1})
	for range 10 {
		l.Observe(ctx, event(observe.Denied)) // WARN
	}
	l.Observe(ctx, event(observe.Error))
	_ = l.Flush(ctx)
	if recs := quiet.records(t); len(recs) != 1 || recs[0]["result"] != "error" {
		t.Errorf("handler at ERROR: want only the error record, got %v", recs)
	}
}

func TestInvalidConfigNamesTheField(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	cases := []struct {
		cfg  decisionlog.Config
		name string
	}{
		{decisionlog.Config{}, "Logger"},
		{decisionlog.Config{Logger: logger, SampleAllowed: -0.1}, "SampleAllowed"},
		{decisionlog.Config{Logger: logger, SampleAllowed: 1.5}, "SampleAllowed"},
		{decisionlog.Config{Logger: logger, SampleAllowed: math.NaN()}, "SampleAllowed"},
		{decisionlog.Config{Logger: logger, Secret: []byte("short")}, "Secret"},
		{decisionlog.Config{Logger: logger, Secret: []byte("0123456789abcdef"), RawKeys: true}, "RawKeys"},
		{decisionlog.Config{Logger: logger, Rate: -1}, "Rate"},
		{decisionlog.Config{Logger: logger, Burst: -5}, "Burst"},
		{decisionlog.Config{Logger: logger, Rate: 1 << 60}, "Rate"},
		{decisionlog.Config{Logger: logger, SummaryInterval: -time.Second}, "SummaryInterval"},
	}
	for _, tc := range cases {
		_, err := decisionlog.New(tc.cfg)
		if !errors.Is(err, decisionlog.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("want an error wrapping ErrInvalidConfig naming %s, got %v", tc.name, err)
		}
	}
}

// A decision that is not logged costs the request no allocation.
func TestNoAllocationUnlessWritten(t *testing.T) {
	ctx := context.Background()
	never := func() uint64 { return math.MaxUint64 }
	cases := []struct {
		name  string
		cfg   decisionlog.Config
		event observe.Event
	}{
		{"allowed, sampling off", decisionlog.Config{}, event(observe.Allowed)},
		{"allowed, not sampled", decisionlog.Config{SampleAllowed: 0.5, Rand: never}, event(observe.Allowed)},
		{"allowed, default generator", decisionlog.Config{SampleAllowed: 1e-9}, event(observe.Allowed)},
		{"denied, dropped by the rate limit", decisionlog.Config{Rate: 1, Burst: 1}, event(observe.Denied)},
		{"denied, below the handler's level", decisionlog.Config{Logger: slog.New(slog.DiscardHandler)}, event(observe.Denied)},
	}
	for _, tc := range cases {
		l, _, _ := newLog(t, tc.cfg)
		l.Observe(ctx, tc.event) // the one record the rate limit lets through
		if n := testing.AllocsPerRun(1000, func() { l.Observe(ctx, tc.event) }); n != 0 {
			t.Errorf("%s: %v allocations per decision, want 0", tc.name, n)
		}
	}
}

func TestDefaultBudget(t *testing.T) {
	cases := []struct {
		rate, burst int64
		atOnce      int
	}{
		{0, 0, 2 * decisionlog.DefaultRate}, // 100/s, burst 200
		{5, 0, 10},                          // burst: twice the rate
		{5, 3, 3},
	}
	for _, tc := range cases {
		counter := &countHandler{}
		l, _, _ := newLog(t, decisionlog.Config{Logger: slog.New(counter), Rate: tc.rate, Burst: tc.burst})
		for range 1000 {
			l.Observe(context.Background(), event(observe.Denied))
		}
		if counter.n != tc.atOnce {
			t.Errorf("Rate %d Burst %d: %d records at one instant, want %d", tc.rate, tc.burst, counter.n, tc.atOnce)
		}
	}
}
