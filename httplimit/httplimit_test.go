package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/headers"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// serve runs the middleware in front of h on a real listener.
func serve(t *testing.T, l floodgate.Limiter, opts Options, h http.Handler) string {
	t.Helper()
	mw, err := New(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	if h == nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	}
	srv := httptest.NewServer(mw(h))
	t.Cleanup(srv.Close)
	return srv.URL
}

type response struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, url string, hdr ...string) response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b)}
}

// fields parses both RateLimit fields as Structured Field Lists and
// returns each policy's parameters by name.
func fields(t *testing.T, h http.Header) map[string]map[string]int64 {
	t.Helper()
	out := map[string]map[string]int64{}
	for _, f := range []string{headers.PolicyField, headers.LimitField} {
		items, err := headers.ParseList(h.Get(f))
		if err != nil {
			t.Fatalf("%s: %q: %v", f, h.Get(f), err)
		}
		for _, it := range items {
			name, ok := it.Value.(string)
			if !ok {
				t.Fatalf("%s: item %v is not a string", f, it.Value)
			}
			if out[name] == nil {
				out[name] = map[string]int64{}
			}
			for _, p := range it.Params {
				n, ok := p.Value.(int64)
				if !ok {
					t.Fatalf("%s: %s=%v is not an integer", f, p.Key, p.Value)
				}
				out[name][p.Key] = n
			}
		}
	}
	return out
}

func decodeProblem(t *testing.T, r response) map[string]any {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return p
}

func TestHeadersAndRetryAfter(t *testing.T) {
	clock := floodgate.NewManualClock(epoch)
	url := serve(t, floodgate.NewMemory(floodgate.WithClock(clock)), Options{
		Rules:         []Rule{{Name: "api", Limit: floodgate.PerMinute(3), Key: Constant("all")}},
		LegacyHeaders: true,
	}, nil)
	for i := int64(0); i < 3; i++ {
		r := get(t, url)
		if r.status != 200 || r.body != "ok" {
			t.Fatalf("request %d: %d %q", i, r.status, r.body)
		}
		f := fields(t, r.header)["api"]
		if f["q"] != 3 || f["w"] != 60 || f["r"] != 2-i {
			t.Fatalf("request %d: %v", i, f)
		}
		if r.header.Get("Retry-After") != "" {
			t.Fatalf("Retry-After on success")
		}
		if r.header.Get("X-RateLimit-Limit") != "3" || r.header.Get("X-RateLimit-Remaining") != strconv.FormatInt(2-i, 10) {
			t.Fatalf("legacy %v", r.header)
		}
	}
	r := get(t, url)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("4th request: %d", r.status)
	}
	ra, err := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
	if err != nil || ra != 20 { // 3/min: a unit every 20 s
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	f := fields(t, r.header)["api"]
	if f["r"] != 0 || f["t"] > ra || f["t"] <= 0 {
		t.Fatalf("denied fields %v, Retry-After %d", f, ra)
	}
	p := decodeProblem(t, r)
	if p["type"] != "https://iana.org/assignments/http-problem-types#quota-exceeded" ||
		p["title"] != "Request cannot be satisfied as assigned quota has been exceeded" ||
		p["status"] != float64(429) {
		t.Fatalf("problem %v", p)
	}
	if v, _ := p["violated-policies"].([]any); len(v) != 1 || v[0] != "api" {
		t.Fatalf("violated-policies %v", p["violated-policies"])
	}
	// Honest: a second early it still denies, at Retry-After it passes.
	clock.Advance(time.Duration(ra)*time.Second - time.Second)
	if r := get(t, url); r.status != 429 {
		t.Fatalf("early retry: %d", r.status)
	}
	clock.Advance(time.Second)
	if r := get(t, url); r.status != 200 {
		t.Fatalf("retry at Retry-After: %d", r.status)
	}
}

func TestRetryAfterCoversEveryViolatedPolicy(t *testing.T) {
	clock := floodgate.NewManualClock(epoch)
	url := serve(t, floodgate.NewMemory(floodgate.WithClock(clock)), Options{Rules: []Rule{
		{Name: "fast", Limit: floodgate.PerSecond(1), Key: Constant("x")},
		{Name: "window", Limit: floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: time.Minute}, Key: Constant("x")},
		{Name: "roomy", Limit: floodgate.PerHour(100), Key: Constant("x")},
	}}, nil)
	if r := get(t, url); r.status != 200 {
		t.Fatal(r.status)
	}
	r := get(t, url)
	if r.status != 429 {
		t.Fatal(r.status)
	}
	ra, _ := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
	fs := fields(t, r.header)
	for _, name := range []string{"fast", "window"} {
		if fs[name]["t"] > ra {
			t.Errorf("%s: t=%d after Retry-After %d", name, fs[name]["t"], ra)
		}
	}
	if fs["roomy"]["r"] != 99 {
		t.Errorf("roomy consumed by a denied request: %v", fs["roomy"])
	}
	p := decodeProblem(t, r)
	if v, _ := p["violated-policies"].([]any); len(v) != 2 || v[0] != "fast" || v[1] != "window" {
		t.Fatalf("violated-policies %v", p["violated-policies"])
	}
	clock.Advance(time.Duration(ra) * time.Second)
	if r := get(t, url); r.status != 200 {
		t.Fatalf("after Retry-After: %d %v", r.status, r.header)
	}
}

// unbatched hides Memory's AllowAll.
type unbatched struct{ l floodgate.Limiter }

func (u unbatched) AllowN(ctx context.Context, key string, l floodgate.Limit, cost int64) (floodgate.Decision, error) {
	return u.l.AllowN(ctx, key, l, cost)
}

func TestAllOrNothing(t *testing.T) {
	rules := []Rule{
		{Name: "global", Limit: floodgate.PerMinute(10), Key: Constant("all")},
		{Name: "user", Limit: floodgate.PerMinute(1), Key: ByHeader("X-User")},
	}
	for _, tc := range []struct {
		name    string
		wrap    func(*floodgate.Memory) floodgate.Limiter
		atomic  bool
		wantRem int64 // global remaining after u1, u1 (denied), u2
	}{
		{"batch", func(m *floodgate.Memory) floodgate.Limiter { return m }, true, 8},
		{"one by one", func(m *floodgate.Memory) floodgate.Limiter { return unbatched{m} }, false, 7},
		{"failover without batches", func(m *floodgate.Memory) floodgate.Limiter {
			// failover has AllowAll only over a store that has it: the
			// middleware goes one by one.
			l, err := failover.New(unbatched{m}, failover.Config{Mode: failover.FailClosed, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, false, 7},
		{"failover with batches", func(m *floodgate.Memory) floodgate.Limiter {
			l, err := failover.New(m, failover.Config{Mode: failover.FailClosed, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, true, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := floodgate.NewManualClock(epoch)
			url := serve(t, tc.wrap(floodgate.NewMemory(floodgate.WithClock(clock))), Options{Rules: rules}, nil)
			if r := get(t, url, "X-User", "u1"); r.status != 200 {
				t.Fatal(r.status)
			}
			r := get(t, url, "X-User", "u1")
			if r.status != 429 {
				t.Fatal(r.status)
			}
			if v, _ := decodeProblem(t, r)["violated-policies"].([]any); len(v) != 1 || v[0] != "user" {
				t.Fatalf("violated %v", v)
			}
			r = get(t, url, "X-User", "u2")
			if r.status != 200 {
				t.Fatal(r.status)
			}
			if got := fields(t, r.header)["global"]["r"]; got != tc.wantRem {
				t.Fatalf("global remaining %d, want %d", got, tc.wantRem)
			}
		})
	}
}

func TestMissingKey(t *testing.T) {
	rules := []Rule{{Name: "per-key", Limit: floodgate.PerMinute(1), Key: ByHeader("X-Api-Key")}}
	clock := floodgate.NewManualClock(epoch)
	mem := floodgate.NewMemory(floodgate.WithClock(clock))

	deny := serve(t, mem, Options{Rules: rules, Missing: Deny}, nil)
	r := get(t, deny)
	if r.status != 400 || !strings.Contains(decodeProblem(t, r)["detail"].(string), `"per-key"`) {
		t.Fatalf("Deny: %d %s", r.status, r.body)
	}

	pass := serve(t, mem, Options{Rules: rules, Missing: Pass}, nil)
	for range 3 {
		if r := get(t, pass); r.status != 200 || r.header.Get("RateLimit") != "" {
			t.Fatalf("Pass: %d %v", r.status, r.header)
		}
	}
	if get(t, pass, "X-Api-Key", "k").status != 200 || get(t, pass, "X-Api-Key", "k").status != 429 {
		t.Fatal("Pass: keyed requests not limited")
	}

	shared := serve(t, mem, Options{Rules: rules, Missing: Shared}, nil)
	if r := get(t, shared); r.status != 200 {
		t.Fatalf("Shared first: %d", r.status)
	}
	if r := get(t, shared); r.status != 429 {
		t.Fatalf("Shared second: %d", r.status)
	}
	if r := get(t, shared, "X-Api-Key", "k2"); r.status != 200 {
		t.Fatalf("a keyed request is not in the shared bucket: %d", r.status)
	}
}

func TestCostFromHeader(t *testing.T) {
	clock := floodgate.NewManualClock(epoch)
	url := serve(t, floodgate.NewMemory(floodgate.WithClock(clock)), Options{Rules: []Rule{{
		Name: "tokens", Limit: floodgate.PerMinute(100), Key: Constant("x"), Cost: CostFromHeader("x-tokens"),
	}}}, nil)
	r := get(t, url, "X-Tokens", "40")
	if r.status != 200 || fields(t, r.header)["tokens"]["r"] != 60 {
		t.Fatalf("%d %v", r.status, r.header)
	}
	if r := get(t, url, "X-Tokens", "0"); r.status != 200 || fields(t, r.header)["tokens"]["r"] != 60 {
		t.Fatalf("cost 0: %d %v", r.status, r.header)
	}
	for _, bad := range [][]string{
		{}, {"X-Tokens", "-1"}, {"X-Tokens", "abc"}, {"X-Tokens", ""}, {"X-Tokens", "+3"},
		{"X-Tokens", "1.5"}, {"X-Tokens", "99999999999999999999"}, {"X-Tokens", "1", "X-Tokens", "2"},
	} {
		r := get(t, url, bad...)
		if r.status != 400 || !strings.Contains(decodeProblem(t, r)["detail"].(string), "X-Tokens") {
			t.Errorf("%q: %d %s", bad, r.status, r.body)
		}
	}
	// More than the bucket holds can never pass: 429 without Retry-After.
	r = get(t, url, "X-Tokens", "101")
	if r.status != 429 || r.header.Get("Retry-After") != "" {
		t.Fatalf("cost above capacity: %d %v", r.status, r.header)
	}
	if r := get(t, url, "X-Tokens", "60"); r.status != 200 {
		t.Fatalf("bad requests consumed quota: %d", r.status)
	}
}

type failing struct{ err error }

func (f failing) AllowN(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
	return floodgate.Decision{}, f.err
}

func TestStoreErrors(t *testing.T) {
	storeErr := errors.Join(floodgate.ErrStoreUnavailable, errors.New("secret: dial tcp"))
	rules := []Rule{{Limit: floodgate.PerSecond(1), Key: Constant("x")}}
	r := get(t, serve(t, failing{storeErr}, Options{Rules: rules}, nil))
	if r.status != 503 || strings.Contains(r.body, "secret") || decodeProblem(t, r)["status"] != float64(503) {
		t.Fatalf("default OnError: %d %s", r.status, r.body)
	}
	var got error
	url := serve(t, failing{storeErr}, Options{Rules: rules, OnError: func(w http.ResponseWriter, r *http.Request, err error) {
		got = err
		w.WriteHeader(http.StatusTeapot)
	}}, nil)
	if r := get(t, url); r.status != http.StatusTeapot || !errors.Is(got, floodgate.ErrStoreUnavailable) {
		t.Fatalf("custom OnError: %d %v", r.status, got)
	}
}

func TestNewValidates(t *testing.T) {
	mem := floodgate.NewMemory()
	ok := Rule{Limit: floodgate.PerSecond(1), Key: Constant("x")}
	for _, tc := range []struct {
		name string
		l    floodgate.Limiter
		opts Options
		want string
	}{
		{"nil limiter", nil, Options{Rules: []Rule{ok}}, "nil limiter"},
		{"no rules", mem, Options{}, "no rules"},
		{"bad limit", mem, Options{Rules: []Rule{{Name: "r", Limit: floodgate.Limit{Algorithm: "x", Rate: 1, Period: time.Second}, Key: Constant("x")}}}, `"r"`},
		{"nil key", mem, Options{Rules: []Rule{{Name: "r", Limit: ok.Limit}}}, "nil Key"},
		{"duplicate", mem, Options{Rules: []Rule{ok, ok}}, "both named"},
		{"colon", mem, Options{Rules: []Rule{{Name: "a:b", Limit: ok.Limit, Key: ok.Key}}}, "':'"},
		{"missing", mem, Options{Rules: []Rule{ok}, Missing: 7}, "Missing"},
		{"max delay", mem, Options{Rules: []Rule{ok}, MaxDelay: -1}, "MaxDelay"},
	} {
		_, err := New(tc.l, tc.opts)
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	_, err := New(mem, Options{Rules: []Rule{{Limit: floodgate.Limit{Rate: -1}, Key: Constant("x")}}})
	if !errors.Is(err, floodgate.ErrInvalidLimit) {
		t.Errorf("bad limit does not wrap ErrInvalidLimit: %v", err)
	}
}

// signalling tells when each decision has been made.
type signalling struct {
	*floodgate.Memory
	decided chan time.Time
}

func (s signalling) AllowAll(ctx context.Context, reqs []floodgate.Request) ([]floodgate.Decision, error) {
	ds, err := s.Memory.AllowAll(ctx, reqs)
	s.decided <- time.Now()
	return ds, err
}

// A leaky bucket spaces requests by holding each for its Delay. On a frozen
// clock the five requests, decided in turn, are given Delays of 0, 50, 100,
// 150 and 200ms; each reaches the handler no sooner than its Delay after
// its decision (a timer never fires early) and no later than that plus the
// lateness a probe measured over the hold and timing.Slack.
func TestShapingSpacesRequests(t *testing.T) {
	const spacing = 50 * time.Millisecond // Rate 20/s
	lim := signalling{floodgate.NewMemory(floodgate.WithClock(floodgate.NewManualClock(epoch))), make(chan time.Time, 10)}
	var mu sync.Mutex
	arrived := map[int]time.Time{}
	url := serve(t, lim, Options{Rules: []Rule{{
		Name:  "shaped",
		Limit: floodgate.Limit{Algorithm: floodgate.LeakyBucket, Rate: 20, Period: time.Second, Burst: 10},
		Key:   Constant("x"),
	}}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.Header.Get("X-Seq"))
		mu.Lock()
		arrived[n] = time.Now()
		mu.Unlock()
	}))
	probe := timing.StartProbe(t)
	const n = 5
	var decided [n]time.Time
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if r := get(t, url, "X-Seq", strconv.Itoa(i)); r.status != 200 {
				t.Errorf("request %d: %d", i, r.status)
			}
		})
		decided[i] = <-lim.decided // one at a time, so request i is i-th in the queue
	}
	wg.Wait()
	for i := range n {
		delay := time.Duration(i) * spacing
		held := arrived[i].Sub(decided[i])
		if held < delay {
			t.Errorf("request %d reached the handler %v after its decision, before its Delay of %v", i, held, delay)
		}
		if over := probe.Over(decided[i], held, delay); over > timing.Slack {
			t.Errorf("request %d held %v, %v beyond its Delay of %v and the %v the scheduler was late (allowed %v); %v",
				i, held, over, delay, probe.Late(decided[i], arrived[i]), timing.Slack, probe)
		}
	}
}

// A client that leaves while its request is held is dropped at once, and
// its place in the queue goes to the requests after it.
func TestShapingClientLeaves(t *testing.T) {
	var called atomic.Int32
	mem := floodgate.NewMemory(floodgate.WithClock(floodgate.NewManualClock(epoch))) // frozen: only requests move the queue
	// One an hour: the second request is held an hour, so within the test
	// only its client's leaving can end the hold.
	limit := floodgate.Limit{Algorithm: floodgate.LeakyBucket, Rate: 1, Period: time.Hour, Burst: 5}
	queued := func() int64 {
		t.Helper()
		d, err := mem.AllowN(context.Background(), "q:x", limit, 0)
		if err != nil {
			t.Fatal(err)
		}
		return limit.Burst - d.Remaining
	}
	lim := signalling{mem, make(chan time.Time, 2)}
	mw, err := New(lim, Options{MaxDelay: 2 * time.Hour, Rules: []Rule{{Name: "q", Limit: limit, Key: Constant("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan struct{}, 2)
	inner := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called.Add(1) }))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r)
		returned <- struct{}{}
	}))
	defer func() {
		if t.Failed() {
			srv.Config.Close() // without waiting an hour for a held handler
			return
		}
		srv.Close()
	}()
	if r := get(t, srv.URL); r.status != 200 {
		t.Fatal(r.status)
	}
	<-lim.decided
	<-returned
	client, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(client, "GET / HTTP/1.1\r\nHost: held\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-lim.decided  // admitted, to be held an hour
	client.Close() // the client leaves
	select {
	case <-returned:
	case <-time.After(timing.Patience):
		t.Fatal("middleware still holds a request whose client left")
	}
	if n := called.Load(); n != 1 {
		t.Fatalf("handler called %d times", n)
	}
	if n := queued(); n != 1 {
		t.Fatalf("%d places taken after the held client left, want 1 (the served request's)", n)
	}
}

func TestMaxDelay(t *testing.T) {
	clock := floodgate.NewManualClock(epoch)
	opts := Options{MaxDelay: 25 * time.Millisecond, Rules: []Rule{{
		Name:  "q",
		Limit: floodgate.Limit{Algorithm: floodgate.LeakyBucket, Rate: 100, Period: time.Second, Burst: 50},
		Key:   Constant("x"),
	}}}
	url := serve(t, floodgate.NewMemory(floodgate.WithClock(clock)), opts, nil)
	for i := range 3 { // delays 0, 10ms, 20ms
		if r := get(t, url); r.status != 200 {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	r := get(t, url) // 30ms > MaxDelay
	if r.status != 429 || r.header.Get("Retry-After") != "1" {
		t.Fatalf("%d %v", r.status, r.header)
	}
	if f := fields(t, r.header)["q"]; f["t"] > 1 {
		t.Fatalf("t %d beyond Retry-After", f["t"])
	}
	// NoShaping passes every admitted request on at once, whatever its
	// Delay: at one an hour, requests that a hold would refuse (beyond
	// MaxDelay) or keep for hours.
	opts.NoShaping = true
	opts.Rules[0].Limit = floodgate.Limit{Algorithm: floodgate.LeakyBucket, Rate: 1, Period: time.Hour, Burst: 10}
	url = serve(t, floodgate.NewMemory(floodgate.WithClock(clock)), opts, nil)
	for i := range 10 {
		if r := get(t, url); r.status != 200 {
			t.Fatalf("NoShaping: request %d (Delay %dh): %d", i, i, r.status)
		}
	}
}

func TestOddInput(t *testing.T) {
	mw, err := New(floodgate.NewMemory(), Options{Rules: []Rule{
		{Name: "ip", Limit: floodgate.PerSecond(100), Key: ByIP(IPOptions{TrustedProxies: testTrusted})},
		{Name: `odd "name" é`, Limit: floodgate.PerSecond(100), Key: Combine(ByHost(), ByPath(), ByHeader("X-K"))},
	}, Missing: Shared, LegacyHeaders: true})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, tc := range []struct {
		remote, host, path, k, xff, fwd string
		want                            int // a key past floodgate.MaxKeyBytes is the request's fault
	}{
		{"", "", "/", "", "", "", 200},
		{"garbage", "::::", "/%00", "\x00", ",,,,", `;;;=,"`, 200},
		{"127.0.0.1:1", "[", "/a|b\\", "k|", "[::1", "for=[::1", 200},
		{"[::]:0", strings.Repeat("h", 1500), "/" + strings.Repeat("x", 1500), strings.Repeat("\xff", 100), strings.Repeat("192.0.2.1,", 1000), strings.Repeat("for=a;", 1000), 200},
		{"[::]:0", strings.Repeat("h", 5000), "/" + strings.Repeat("x", 5000), strings.Repeat("\xff", 100), strings.Repeat("192.0.2.1,", 1000), strings.Repeat("for=a;", 1000), 400},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr, r.Host, r.URL.Path = tc.remote, tc.host, tc.path
		r.Header.Set("X-K", tc.k)
		r.Header.Set("X-Forwarded-For", tc.xff)
		r.Header.Set("Forwarded", tc.fwd)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Fatalf("%+v: %d %s, want %d", tc, w.Code, w.Body, tc.want)
		}
		if _, err := headers.ParseList(w.Header().Get("RateLimit")); err != nil {
			t.Fatalf("%+v: RateLimit %q: %v", tc, w.Header().Get("RateLimit"), err)
		}
	}
}

func TestUnreadablePeerAndLegacyDenial(t *testing.T) {
	clock := floodgate.NewManualClock(epoch)
	mw, err := New(floodgate.NewMemory(floodgate.WithClock(clock)), Options{
		Rules:         []Rule{{Name: "ip", Limit: floodgate.PerMinute(1), Key: ByIP(IPOptions{})}},
		LegacyHeaders: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	do := func(remote string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := do("@unix"); w.Code != 400 || !strings.Contains(w.Body.String(), `\"ip\"`) {
		t.Fatalf("unreadable peer under Deny: %d %s", w.Code, w.Body)
	}
	do("192.0.2.1:1")
	w := do("192.0.2.1:2")
	if w.Code != 429 || w.Header().Get("X-RateLimit-Limit") != "1" ||
		w.Header().Get("X-RateLimit-Remaining") != "0" || w.Header().Get("X-RateLimit-Reset") != "60" {
		t.Fatalf("legacy on denial: %d %v", w.Code, w.Header())
	}
	if w := do("192.0.2.2:1"); w.Code != 200 {
		t.Fatalf("another client: %d", w.Code)
	}
}
