package erldiff

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate-io/floodgate/internal/testkit"
)

// settings size and steer a run; each comes from a FLOODGATE_ERL_
// variable (docs/envoy-ratelimit.md).
type settings struct {
	bin       string   // FLOODGATE_ERL_BIN: the envoyproxy/ratelimit binary
	seed      uint64   // FLOODGATE_ERL_SEED (default: from the clock, printed)
	configs   int      // FLOODGATE_ERL_CONFIGS, default 20
	requests  int      // FLOODGATE_ERL_REQUESTS per configuration, default 30
	feat      features // FLOODGATE_ERL_FEATURES, default none
	headers   bool     // FLOODGATE_ERL_HEADERS: response headers on in both, and compared
	serveArgs []string // FLOODGATE_ERL_SERVE_ARGS: more `floodgate serve` flags
	erlEnv    []string // FLOODGATE_ERL_MODES: envoyproxy/ratelimit's global modes (their flags go to serveArgs)
	fgBin     string   // FLOODGATE_ERL_FLOODGATE: a floodgate binary (default: built from this tree)
}

const (
	defaultConfigs  = 20
	defaultRequests = 30
	// callTimeout bounds one ShouldRateLimit call: a hang fails, it does
	// not stall the run.
	callTimeout = 10 * time.Second
	// sequenceAttempts bounds the retries of a sequence that straddled a
	// window boundary (each after both Redis are flushed).
	sequenceAttempts = 4
	// shownPerConfig caps the requests printed in full per configuration.
	shownPerConfig = 8
)

func readSettings() (settings, error) {
	s := settings{bin: os.Getenv("FLOODGATE_ERL_BIN"), seed: uint64(time.Now().UnixNano()),
		configs: defaultConfigs, requests: defaultRequests}
	var errs []error
	number := func(name string, into *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				errs = append(errs, fmt.Errorf("%s=%q: want a positive integer", name, v))
			}
			*into = n
		}
	}
	number("FLOODGATE_ERL_CONFIGS", &s.configs)
	number("FLOODGATE_ERL_REQUESTS", &s.requests)
	if v := os.Getenv("FLOODGATE_ERL_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("FLOODGATE_ERL_SEED=%q: %w", v, err))
		}
		s.seed = seed
	}
	feat, err := parseFeatures(os.Getenv("FLOODGATE_ERL_FEATURES"))
	if err != nil {
		errs = append(errs, fmt.Errorf("FLOODGATE_ERL_FEATURES: %w", err))
	}
	s.feat = feat
	if v := os.Getenv("FLOODGATE_ERL_HEADERS"); v != "" {
		h, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("FLOODGATE_ERL_HEADERS=%q: %w", v, err))
		}
		s.headers = h
	}
	s.serveArgs = strings.Fields(os.Getenv("FLOODGATE_ERL_SERVE_ARGS"))
	if err := s.readModes(os.Getenv("FLOODGATE_ERL_MODES")); err != nil {
		errs = append(errs, fmt.Errorf("FLOODGATE_ERL_MODES: %w", err))
	}
	s.fgBin = os.Getenv("FLOODGATE_ERL_FLOODGATE")
	return s, errors.Join(errs...)
}

// globalModes are envoyproxy/ratelimit's global modes by name, as its
// variable and as serve's flag.
var globalModes = map[string]struct{ env, flag string }{
	"shadow": {"SHADOW_MODE=true", "--shadow-mode"},
	"quota":  {"QUOTA_MODE=true", "--quota-mode"},
}

// readModes turns on the global modes named in v, comma-separated, in both
// services.
func (s *settings) readModes(v string) error {
	for _, name := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		m, ok := globalModes[name]
		if !ok {
			return fmt.Errorf("%q: want shadow, quota or both, comma-separated", name)
		}
		s.erlEnv = append(s.erlEnv, m.env)
		s.serveArgs = append(s.serveArgs, m.flag)
	}
	return nil
}

// TestMatchesEnvoyRatelimit sends the same random requests to
// envoyproxy/ratelimit and to `floodgate serve`, both loaded with the same
// random configuration and each on a fresh Redis of its own, and fails on
// every difference in their answers that is not a listed deliberate one.
func TestMatchesEnvoyRatelimit(t *testing.T) {
	s, err := readSettings()
	if err != nil {
		t.Fatal(err)
	}
	if s.bin == "" {
		t.Skip("FLOODGATE_ERL_BIN is not set: it names an envoyproxy/ratelimit binary to compare with " +
			"(git clone https://github.com/envoyproxy/ratelimit; cd ratelimit; go build -o ratelimit ./src/service_cmd; " +
			"see docs/envoy-ratelimit.md)")
	}
	if _, err := os.Stat(s.bin); err != nil {
		t.Fatalf("FLOODGATE_ERL_BIN: %v", err)
	}
	t.Logf("seed %d (replay: FLOODGATE_ERL_SEED=%d), %d configurations × %d requests, features %+v, headers %v, global modes %v",
		s.seed, s.seed, s.configs, s.requests, s.feat, s.headers, s.erlEnv)
	if s.fgBin == "" {
		s.fgBin = buildFloodgate(t)
	}
	r := &run{settings: s, erlRedis: testkit.StartServer(t), fgRedis: testkit.StartServer(t),
		tally: map[string]int{}}
	for i := range s.configs {
		sc := newGenerator(s.seed, i, s.feat).scenario(i, s.requests)
		t.Run(fmt.Sprintf("config%d", i), func(t *testing.T) { r.scenario(t, sc) })
	}
	r.summarize(t)
}

// run is the state one test shares across its configurations: the two
// Redis servers (flushed between sequences) and the tally of differences.
type run struct {
	settings
	erlRedis, fgRedis *testkit.Server

	mu       sync.Mutex
	tally    map[string]int // cause (or "tolerated: name") -> count
	requests int
}

func (r *run) count(key string) {
	r.mu.Lock()
	r.tally[key]++
	r.mu.Unlock()
}

func (r *run) scenario(t *testing.T, sc *scenario) {
	r.flush(t)
	root, dir := writeConfig(t, sc)
	_, erlAddr, erlErr := startERL(t, r.bin, root, r.erlRedis.Addr(), r.headers, r.erlEnv)
	_, fgAddr, fgErr := startFloodgate(t, r.fgBin, dir, r.fgRedis.Addr(), r.headers, r.serveArgs)
	switch {
	case errors.Is(erlErr, errConfigRejected) && errors.Is(fgErr, errConfigRejected):
		t.Logf("both refuse the configuration (the generator should not draw it):\n%s\n%v\n%v", sc.yaml(), erlErr, fgErr)
		return
	case errors.Is(erlErr, errConfigRejected) || errors.Is(fgErr, errConfigRejected):
		r.count("config verdict")
		t.Errorf("configuration verdicts differ:\n%s\n%v\n%v", sc.yaml(), verdict("envoyproxy/ratelimit", erlErr), verdict("floodgate", fgErr))
		return
	case erlErr != nil || fgErr != nil:
		t.Fatalf("starting the services: %v", errors.Join(erlErr, fgErr))
	}
	erl, fg := dial(t, erlAddr), dial(t, fgAddr)
	units := sc.units()
	var results []outcomePair
	var began, ended time.Time
	for attempt := range sequenceAttempts {
		if attempt > 0 {
			r.flush(t)
		}
		results, began, ended = r.sequence(t, sc, erl, fg, units)
		if sameWindows(units, began, ended) {
			break
		}
		t.Logf("attempt %d: the sequence (%v…%v) straddled a window boundary; flushing both Redis and repeating it", attempt+1, began.Format(time.StampMilli), ended.Format(time.StampMilli))
		results = nil
	}
	if results == nil {
		t.Logf("every attempt straddled a window boundary (a very busy machine?); configuration not compared")
		return
	}
	r.report(t, sc, results, r.collision(t, sc, units, began))
}

// collision is the deliberate difference that covers a whole sequence whose
// windows of two units start at the same second while it runs, if the
// scenario's overrides can put both on the same entries: envoyproxy/ratelimit
// keys a counter by the entries and the window's start, without the unit,
// so it counts them together (docs/envoy-ratelimit.md); "" otherwise.
// sequence waits out the second-long cases; the longer ones (the first
// minute of an hour, the first hour of a day, ...) cannot be waited out.
func (r *run) collision(t *testing.T, sc *scenario, units []string, began time.Time) string {
	u, v, ok := startTogether(units, began)
	if !ok || !sc.hasOverrides() {
		return ""
	}
	t.Logf("the windows of a %s and of a %s start together (%s): differences of this sequence are tolerated", u, v, began.Format(time.StampMilli))
	return windowsTogether
}

// windowsTogether names the deliberate difference collision reports.
const windowsTogether = "windows of two units starting together: one counter in envoyproxy/ratelimit"

// startTogether reports the shortest two of units whose windows holding at
// start at the same second.
func startTogether(units []string, at time.Time) (shorter, longer string, ok bool) {
	sorted := slices.SortedFunc(slices.Values(units), func(a, b string) int { return cmp.Compare(unitSeconds[a], unitSeconds[b]) })
	for i, u := range sorted {
		for _, v := range sorted[i+1:] {
			if at.Unix()/unitSeconds[u]*unitSeconds[u] == at.Unix()/unitSeconds[v]*unitSeconds[v] {
				return u, v, true
			}
		}
	}
	return "", "", false
}

func verdict(name string, err error) string {
	if err == nil {
		return name + " accepts it"
	}
	return err.Error()
}

// flush empties both Redis servers: each sequence starts from zero.
func (r *run) flush(t *testing.T) {
	r.erlRedis.Do(t, "FLUSHALL")
	r.fgRedis.Do(t, "FLUSHALL")
}

func dial(t *testing.T, addr string) rlsv3.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

type outcomePair struct{ erl, fg outcome }

// sequence sends each request to both services in turn, starting just
// after a second boundary when the time left in this second is short, and
// returns the answers with the times that enclose every decision.
func (r *run) sequence(t *testing.T, sc *scenario, erl, fg rlsv3.RateLimitServiceClient, units []string) ([]outcomePair, time.Time, time.Time) {
	if len(units) > 0 {
		waitForRoom(secondBudget(len(sc.requests)))
	}
	if u, _, ok := startTogether(units, time.Now()); ok && u == "second" && sc.hasOverrides() {
		waitForRoom(time.Second) // the next second starts no other window (see collision)
	}
	began := time.Now()
	out := make([]outcomePair, len(sc.requests))
	for i, req := range sc.requests {
		out[i] = outcomePair{call(t, erl, req), call(t, fg, req)}
	}
	return out, began, time.Now()
}

func call(t *testing.T, c rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest) outcome {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, req)
	return outcome{resp: resp, err: err}
}

// secondBudget is the time a sequence of n request pairs is given within
// one second before it waits for the next one: a few milliseconds a pair
// on a busy machine, and never the whole second.
func secondBudget(n int) time.Duration {
	return min(time.Duration(n)*15*time.Millisecond, 800*time.Millisecond)
}

// waitForRoom waits for the next second to begin if less than budget is
// left of this one. Real time is the point: the services count in
// windows of the wall clock.
func waitForRoom(budget time.Duration) {
	now := time.Now()
	left := now.Truncate(time.Second).Add(time.Second).Sub(now)
	if left < budget {
		time.Sleep(left + 5*time.Millisecond)
	}
}

// unitSeconds are the window lengths both services count in, as
// envoyproxy/ratelimit defines them (windows aligned on the Unix epoch).
var unitSeconds = map[string]int64{
	"second": 1, "minute": 60, "hour": 3600, "day": 86400,
	"week": 7 * 86400, "month": 30 * 86400, "year": 365 * 86400,
}

// sameWindows reports whether began and ended fall in the same window of
// every unit: then every decision of the sequence did.
func sameWindows(units []string, began, ended time.Time) bool {
	for _, u := range units {
		if began.Unix()/unitSeconds[u] != ended.Unix()/unitSeconds[u] {
			return false
		}
	}
	return true
}

// report compares every answer, logs the differing requests in full
// (configuration, request, both answers, fields) and fails on any that is
// not deliberate.
func (r *run) report(t *testing.T, sc *scenario, results []outcomePair, tolerateAll string) {
	var shown, failing int
	var b strings.Builder
	for i, p := range results {
		req := sc.requests[i]
		diffs := compare(req, p.erl, p.fg, r.headers)
		for j := range diffs {
			if tolerateAll != "" {
				diffs[j].tolerate = tolerateAll
			}
		}
		r.mu.Lock()
		r.requests++
		r.mu.Unlock()
		var bad []difference
		for _, d := range diffs {
			if d.tolerate != "" {
				r.count("tolerated: " + d.tolerate)
				continue
			}
			r.count(d.cause())
			bad = append(bad, d)
		}
		if len(bad) == 0 {
			continue
		}
		failing++
		if shown++; shown > shownPerConfig {
			continue
		}
		fmt.Fprintf(&b, "\nrequest %d: %s\n  envoyproxy/ratelimit: %s\n  floodgate:            %s\n", i, compact(req), p.erl, p.fg)
		for _, d := range bad {
			fmt.Fprintf(&b, "  %s: envoyproxy/ratelimit %s, floodgate %s\n", d.field, d.erl, d.fg)
		}
	}
	if failing == 0 {
		return
	}
	if failing > shownPerConfig {
		fmt.Fprintf(&b, "\n(%d more differing requests not shown)\n", failing-shownPerConfig)
	}
	t.Errorf("%d of %d requests answered differently; configuration:\n%s%s", failing, len(results), sc.yaml(), b.String())
}

// yaml is every file of the scenario, as both services load them.
func (sc *scenario) yaml() string {
	var b strings.Builder
	for _, f := range sc.files {
		fmt.Fprintf(&b, "--- %s.yaml\n%s", f.Domain, f.yaml())
	}
	return b.String()
}

func (r *run) summarize(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, k := range sortedKeys(r.tally) {
		fmt.Fprintf(&b, "\n  %5d  %s", r.tally[k], k)
	}
	if b.Len() == 0 {
		b.WriteString(" none")
	}
	t.Logf("%d requests compared; differences by field (seed %d):%s", r.requests, r.seed, b.String())
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
