package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/client"
)

// jitterWindow is the first retry's backoff window: the most a retry waits
// beyond what the server asked.
var jitterWindow = client.DefaultBackoff.Base

// A refusal is retried after the longest wait its fields ask for, never
// earlier and at most one backoff window later; with no usable field, after
// a backoff draw.
func TestRetryWaitsWhatTheServerAsks(t *testing.T) {
	const skew = time.Hour // the client's clock runs an hour ahead of the server's
	for _, tc := range []struct {
		name   string
		refuse answer
		asked  time.Duration // -1: the server says nothing, expect backoff
	}{
		{"Retry-After seconds", answer{status: 429, header: fields("Retry-After", "3")}, 3 * time.Second},
		{"Retry-After on 503", answer{status: 503, header: fields("Retry-After", "1")}, time.Second},
		{"Retry-After date, measured from the response's Date", answer{status: 429, header: func(now time.Time) http.Header {
			server := now.Add(-skew)
			return http.Header{"Date": {server.UTC().Format(http.TimeFormat)}, "Retry-After": {server.Add(7 * time.Second).UTC().Format(http.TimeFormat)}}
		}}, 7 * time.Second},
		{"RateLimit t of the policy at r=0", answer{status: 429, header: fields(
			"RateLimit-Policy", `"burst";q=10;w=1, "day";q=1000;w=86400`,
			"RateLimit", `"burst";r=0;t=5, "day";r=400;t=50000`)}, 5 * time.Second},
		{"legacy reset in seconds", answer{status: 429, header: fields("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "4")}, 4 * time.Second},
		{"legacy reset as a Unix time", answer{status: 429, header: func(now time.Time) http.Header {
			server := now.Add(-skew).Truncate(time.Second)
			return http.Header{"Date": {server.UTC().Format(http.TimeFormat)}, "X-Ratelimit-Reset": {strconv.FormatInt(server.Unix()+6, 10)}}
		}}, 6 * time.Second},
		{"legacy reset ignored while remaining > 0", answer{status: 429, header: fields("X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "9")}, -1},
		{"the longest of several", answer{status: 429, header: fields("Retry-After", "2", "RateLimit", `"api";r=0;t=6`, "X-RateLimit-Reset", "4")}, 6 * time.Second},
		{"nothing: backoff", answer{status: 503}, -1},
		{"malformed Retry-After: backoff", answer{status: 429, header: fields("Retry-After", "soon")}, -1},
		{"malformed RateLimit, good Retry-After", answer{status: 429, header: fields("RateLimit", `api;r=`, "Retry-After", "2")}, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := newFakeTime()
			srv := serve(t, ft.Clock, tc.refuse, ok)
			status, body, err := do(t, client.NewTransport(nil, ft.options(1)...), get(t, srv.URL))
			if err != nil || status != 200 || body != "ok" {
				t.Fatalf("got %d %q %v, want 200 ok", status, body, err)
			}
			got := srv.requests()
			waits := ft.Slept()
			if len(got) != 2 || len(waits) != 1 {
				t.Fatalf("%d requests and waits %v, want 2 requests and one wait", len(got), waits)
			}
			lo, hi := tc.asked, tc.asked+jitterWindow
			if tc.asked < 0 {
				lo, hi = 0, jitterWindow
			}
			if w := waits[0]; w < lo || w >= hi {
				t.Fatalf("waited %v, want [%v, %v)", w, lo, hi)
			}
			if gap := got[1].at.Sub(got[0].at); gap < lo {
				t.Fatalf("the retry came %v after the refusal, earlier than the %v asked", gap, lo)
			}
		})
	}
}

// A wait that would pass the context's deadline is not started: the error
// wraps context.DeadlineExceeded and says what the server asked.
func TestDeadlineShorterThanTheWaitFailsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		refuse     answer
		opts       []client.Option
	}{
		{"Retry-After", "2m0s (Retry-After), beyond the context's deadline in 1m0s", answer{status: 429, header: fields("Retry-After", "120")}, nil},
		{"RateLimit", `2m0s (RateLimit "api" t)`, answer{status: 429, header: fields("RateLimit", `"api";r=0;t=120`)}, nil},
		{"backoff", "backoff (up to 2m0s)", answer{status: 503}, []client.Option{
			client.WithBackoff(client.Backoff{Base: 2 * time.Minute, Cap: time.Hour}),
			client.WithRand(constRand(0.99)), // a draw beyond the minute left
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := newFakeTime()
			srv := serve(t, ft.Clock, tc.refuse, ok)
			ctx, cancel := context.WithDeadline(context.Background(), ft.Clock.Now().Add(time.Minute))
			defer cancel()
			_, _, err := do(t, client.NewTransport(nil, ft.options(1, tc.opts...)...), get(t, srv.URL).WithContext(ctx))
			if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, client.ErrPastDeadline) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error wrapping context.DeadlineExceeded that says %q", err, tc.want)
			}
			if n, w := len(srv.requests()), ft.Slept(); n != 1 || len(w) != 0 {
				t.Fatalf("%d requests, waits %v; want 1 request and no wait", n, w)
			}
		})
	}
}

// A wait above MaxWait is not waited: the caller gets the refusal itself.
func TestWaitAboveMaxWaitReturnsTheRefusal(t *testing.T) {
	ft := newFakeTime()
	srv := serve(t, ft.Clock, answer{status: 429, header: fields("Retry-After", "31"), body: "later"}, ok)
	status, body, err := do(t, client.NewTransport(nil, ft.options(1)...), get(t, srv.URL))
	if err != nil || status != 429 || body != "later" {
		t.Fatalf("got %d %q %v, want the 429 and its body", status, body, err)
	}
	if n, w := len(srv.requests()), ft.Slept(); n != 1 || len(w) != 0 {
		t.Fatalf("%d requests, waits %v; want 1 and none", n, w)
	}
}

// After MaxRetries retries the last refusal goes to the caller.
func TestRetriesStopAtTheMaximum(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		ft := newFakeTime()
		srv := serve(t, ft.Clock, answer{status: 503, header: fields("Retry-After", "1"), body: "busy"})
		opts := ft.options(1, client.WithoutBudget(), client.WithoutThrottle())
		if n != client.DefaultMaxRetries {
			opts = append(opts, client.WithMaxRetries(n))
		}
		status, body, err := do(t, client.NewTransport(nil, opts...), get(t, srv.URL))
		if err != nil || status != 503 || body != "busy" {
			t.Fatalf("max %d: got %d %q %v, want the last 503", n, status, body, err)
		}
		if got := len(srv.requests()); got != n+1 {
			t.Fatalf("max %d: %d requests, want %d", n, got, n+1)
		}
	}
}

// Which requests are retried: idempotent methods and Idempotency-Key by
// default, others when asked, and only bodies that can be read again; a
// retried body arrives byte for byte.
func TestWhichRequestsAreRetried(t *testing.T) {
	payload := "{\"a\":1}\x00\xff" + strings.Repeat("x", 100_000)
	for _, tc := range []struct {
		name     string
		method   string
		body     func() io.Reader // nil: no body
		key      bool             // Idempotency-Key
		nonIdem  bool             // WithRetryNonIdempotent
		requests int
	}{
		{"GET", "GET", nil, false, false, 2},
		{"DELETE", "DELETE", nil, false, false, 2},
		{"PUT with GetBody", "PUT", func() io.Reader { return strings.NewReader(payload) }, false, false, 2},
		{"POST", "POST", func() io.Reader { return strings.NewReader(payload) }, false, false, 1},
		{"PATCH", "PATCH", func() io.Reader { return strings.NewReader(payload) }, false, false, 1},
		{"POST with Idempotency-Key", "POST", func() io.Reader { return bytes.NewReader([]byte(payload)) }, true, false, 2},
		{"POST when configured", "POST", func() io.Reader { return bytes.NewBufferString(payload) }, false, true, 2},
		{"PUT body without GetBody", "PUT", func() io.Reader { return io.MultiReader(strings.NewReader(payload)) }, false, false, 1},
		{"POST body without GetBody, configured", "POST", func() io.Reader { return io.MultiReader(strings.NewReader(payload)) }, false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := newFakeTime()
			srv := serve(t, ft.Clock, answer{status: 429, header: fields("Retry-After", "1")}, ok)
			var body io.Reader
			if tc.body != nil {
				body = tc.body()
			}
			req, err := http.NewRequest(tc.method, srv.URL, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.key {
				req.Header.Set("Idempotency-Key", "k-1")
			}
			var opts []client.Option
			if tc.nonIdem {
				opts = append(opts, client.WithRetryNonIdempotent())
			}
			status, _, err := do(t, client.NewTransport(nil, ft.options(1, opts...)...), req)
			got := srv.requests()
			if err != nil || len(got) != tc.requests {
				t.Fatalf("%d requests (last status %d, %v), want %d", len(got), status, err, tc.requests)
			}
			if want := map[int]int{1: 429, 2: 200}[tc.requests]; status != want {
				t.Fatalf("status %d, want %d", status, want)
			}
			for i, r := range got {
				if tc.body != nil && r.body != payload {
					t.Fatalf("attempt %d: body of %d bytes differs from the %d sent", i, len(r.body), len(payload))
				}
			}
		})
	}
}

// A connection that fails before an answer is retried, with backoff, for
// idempotent requests only; the caller's own cancellation never is.
func TestTransportErrorsRetriedForIdempotentRequestsOnly(t *testing.T) {
	for _, tc := range []struct {
		method   string
		requests int
	}{{"GET", 2}, {"PUT", 2}, {"POST", 1}} {
		t.Run(tc.method, func(t *testing.T) {
			ft := newFakeTime()
			var dropped atomic.Int32
			srv := serveWrapped(t, ft.Clock, func(h http.Handler) http.Handler { return dropFirst(&dropped, h) }, ok)
			req, _ := http.NewRequest(tc.method, srv.URL, strings.NewReader("body"))
			status, _, err := do(t, client.NewTransport(nil, ft.options(1, client.WithRetryNonIdempotent())...), req)
			if got := int(dropped.Load()) + len(srv.requests()); got != tc.requests {
				t.Fatalf("%d attempts (status %d, %v), want %d", got, status, err, tc.requests)
			}
			if tc.requests == 1 && err == nil {
				t.Fatal("a POST whose connection dropped succeeded; want the error")
			}
			if tc.requests == 2 && (err != nil || status != 200) {
				t.Fatalf("got %d %v after the retry, want 200", status, err)
			}
		})
	}
	t.Run("connection refused, every retry", func(t *testing.T) {
		ft := newFakeTime()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, _, err = do(t, client.NewTransport(nil, ft.options(1)...), get(t, "http://"+addr))
		if err == nil || len(ft.Slept()) != client.DefaultMaxRetries {
			t.Fatalf("err %v after waits %v, want the refusal after %d backoffs", err, ft.Slept(), client.DefaultMaxRetries)
		}
		for i, w := range ft.Slept() {
			if win := client.DefaultBackoff.Window(i); w < 0 || w >= win {
				t.Fatalf("backoff %d: %v, want [0, %v)", i, w, win)
			}
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ft := newFakeTime()
		srv := serve(t, ft.Clock, ok)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := do(t, client.NewTransport(nil, ft.options(1)...), get(t, srv.URL).WithContext(ctx))
		if !errors.Is(err, context.Canceled) || len(ft.Slept()) != 0 {
			t.Fatalf("got %v after waits %v, want context.Canceled at once", err, ft.Slept())
		}
	})
}

// dropFirst closes the connection of the first request without answering.
func dropFirst(dropped *atomic.Int32, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dropped.CompareAndSwap(0, 1) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}

// When a response says r=0 for a policy, the next request to that host
// waits until the policy's t instead of being sent to be refused; other
// hosts are not held, and r > 0 ends the pause.
func TestPauseAfterRateLimitAtZero(t *testing.T) {
	ft := newFakeTime()
	exhausted := answer{status: 200, header: fields("RateLimit", `"api";r=0;t=5`), body: "last"}
	fresh := answer{status: 200, header: fields("RateLimit", `"api";r=9;t=10`), body: "ok"}
	srv := serve(t, ft.Clock, exhausted, fresh)
	other := serve(t, ft.Clock, ok)
	rt := client.NewTransport(nil, ft.options(1)...)

	for _, step := range []struct {
		url  string
		wait bool // expect a pause of [5s, 5s+jitter)
	}{{srv.URL, false}, {other.URL, false}, {srv.URL, true}, {srv.URL, false}} {
		before := len(ft.Slept())
		if status, _, err := do(t, rt, get(t, step.url)); err != nil || status != 200 {
			t.Fatalf("got %d %v", status, err)
		}
		waits := ft.Slept()[before:]
		switch {
		case step.wait && (len(waits) != 1 || waits[0] < 5*time.Second || waits[0] >= 5*time.Second+jitterWindow):
			t.Fatalf("waits %v before the request after r=0;t=5, want one in [5s, 5.1s)", waits)
		case !step.wait && len(waits) != 0:
			t.Fatalf("waits %v, want none", waits)
		}
	}
	got := srv.requests()
	if gap := got[1].at.Sub(got[0].at); gap < 5*time.Second {
		t.Fatalf("the request after r=0;t=5 arrived %v later, want ≥ 5s", gap)
	}

	// A pause past the deadline fails without sending.
	srv2 := serve(t, ft.Clock, answer{status: 200, header: fields("RateLimit", `"api";r=0;t=20`)}, ok)
	do(t, rt, get(t, srv2.URL))
	ctx, cancel := context.WithDeadline(context.Background(), ft.Clock.Now().Add(10*time.Second))
	defer cancel()
	_, _, err := do(t, rt, get(t, srv2.URL).WithContext(ctx))
	if !errors.Is(err, context.DeadlineExceeded) || len(srv2.requests()) != 1 {
		t.Fatalf("got %v after %d requests, want context.DeadlineExceeded and nothing sent", err, len(srv2.requests()))
	}
}

// Clients refused together with the same Retry-After come back spread out,
// none earlier than asked.
func TestJitterSpreadsClientsToldTheSameWait(t *testing.T) {
	ft := newFakeTime()
	srv := serve(t, ft.Clock, answer{status: 429, header: fields("Retry-After", "1")})
	first := map[time.Duration]bool{}
	for i := range 20 {
		rt := client.NewTransport(nil, ft.options(uint64(i), client.WithMaxRetries(1))...)
		before := len(ft.Slept())
		do(t, rt, get(t, srv.URL))
		w := ft.Slept()[before]
		if w < time.Second {
			t.Fatalf("client %d waited %v, less than the 1s asked", i, w)
		}
		first[w] = true
	}
	if len(first) < 15 {
		t.Fatalf("20 clients chose only %d distinct waits", len(first))
	}
}

// With the retry budget spent, refusals go back to the caller; the
// retries stay within Max + Ratio·requests + MinPerSecond·seconds.
func TestBudgetBoundsRetries(t *testing.T) {
	ft := newFakeTime()
	srv := serve(t, ft.Clock, answer{status: 503, body: "busy"})
	b := client.Budget{Ratio: 0.1, MinPerSecond: 0.5, Max: 3}
	rt := client.NewTransport(nil, ft.options(1, client.WithBudget(b), client.WithoutThrottle())...)
	start := ft.Clock.Now()
	const requests = 200
	for range requests {
		if status, _, err := do(t, rt, get(t, srv.URL)); err != nil || status != 503 {
			t.Fatalf("got %d %v, want the 503", status, err)
		}
		ft.Clock.Advance(10 * time.Millisecond)
	}
	retries := len(srv.requests()) - requests
	bound := b.Max + b.Ratio*requests + b.MinPerSecond*ft.Clock.Now().Sub(start).Seconds()
	if float64(retries) > bound {
		t.Fatalf("%d retries for %d requests, above the budget's %.1f", retries, requests, bound)
	}
	if retries < int(b.Ratio*requests) {
		t.Fatalf("%d retries: the budget's %.0f were not used", retries, b.Ratio*requests)
	}
}

// Under a server that accepts one request a second, a client sending ten
// a second rejects requests locally at the SRE formula's rate,
// 1 − K·accepts/requests, which here settles near 1 − 2·0.8/10; when the
// server recovers, the client stops rejecting within a window.
func TestThrottleRejectsLocallyAndRecovers(t *testing.T) {
	ft := newFakeTime()
	var mu sync.Mutex
	var lastOK int64 // the last second with an accepted request
	capacity := true
	srv := serveWrapped(t, ft.Clock, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			second := ft.Clock.Now().Unix()
			refuse := capacity && second == lastOK
			if !refuse {
				lastOK = second
			}
			mu.Unlock()
			if refuse {
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			next.ServeHTTP(w, r)
		})
	}, ok)
	const window = 20 * time.Second
	rt := client.NewTransport(nil, ft.options(7, client.WithMaxRetries(0), client.WithThrottleWindow(window))...)
	run := func(d time.Duration) (accepted, refused, rejected int) {
		for end := ft.Clock.Now().Add(d); ft.Clock.Now().Before(end); ft.Clock.Advance(100 * time.Millisecond) {
			status, _, err := do(t, rt, get(t, srv.URL))
			switch {
			case errors.Is(err, client.ErrThrottled):
				rejected++
			case err != nil:
				t.Fatal(err)
			case status == 200:
				accepted++
			default:
				refused++
			}
		}
		return accepted, refused, rejected
	}
	run(2 * window) // settle
	accepted, refused, rejected := run(window)
	requests := accepted + refused + rejected
	share := float64(rejected) / float64(requests)
	want := 1 - client.DefaultThrottle.K*float64(accepted)/float64(requests)
	if share < want-0.05 || share > want+0.05 || share < 0.7 {
		t.Fatalf("rejected %d of %d locally (%.2f) with %d accepted, want 1 − K·accepts/requests = %.2f ± 0.05",
			rejected, requests, share, accepted, want)
	}
	mu.Lock()
	capacity = false
	mu.Unlock()
	// The window's buckets slide out one at a time, so the local
	// rejections of the first window after recovery still count through
	// much of the next one, where a few more may happen (how many depends
	// on where the buckets' edges fall); two windows on, every request in
	// the window was sent and accepted.
	run(2 * window)
	if accepted, refused, rejected := run(window); rejected != 0 || refused != 0 {
		t.Fatalf("after recovery: %d of %d rejected locally, want none", rejected, accepted+refused+rejected)
	}
}

// An invalid option makes every request fail, unsent, naming the option.
func TestInvalidOptionsFailEveryRequest(t *testing.T) {
	for _, tc := range []struct {
		opt  client.Option
		want string
	}{
		{client.WithMaxRetries(-1), "WithMaxRetries(-1)"},
		{client.WithMaxWait(0), "WithMaxWait(0s)"},
		{client.WithBackoff(client.Backoff{Base: time.Second, Cap: time.Millisecond}), "WithBackoff"},
		{client.WithBackoff(client.Backoff{}), "WithBackoff"},
		{client.WithBudget(client.Budget{Ratio: 2, Max: 10}), "WithBudget"},
		{client.WithBudget(client.Budget{Ratio: 0.1, Max: 0}), "WithBudget"},
		{client.WithThrottle(0.5), "WithThrottle(K 0.5"},
		{client.WithThrottleWindow(0), "WithThrottle"},
		{client.WithClock(nil, nil), "WithClock"},
		{client.WithRand(nil), "WithRand(nil)"},
		{client.WithLogger(nil), "WithLogger(nil)"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			err := client.Validate(tc.opt)
			if !errors.Is(err, client.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want ErrInvalidOption naming %s", err, tc.want)
			}
			srv := serve(t, newFakeTime().Clock, ok)
			_, _, err = do(t, client.NewTransport(nil, tc.opt), get(t, srv.URL))
			if !errors.Is(err, client.ErrInvalidOption) || len(srv.requests()) != 0 {
				t.Fatalf("RoundTrip: %v after %d requests, want ErrInvalidOption and none sent", err, len(srv.requests()))
			}
		})
	}
	if err := client.Validate(client.WithThrottle(1), client.WithMaxRetries(0), client.WithoutBudget()); err != nil {
		t.Fatalf("valid options: %v", err)
	}
}

// The transport compares the r of consecutive answers: when r fell by more
// than its own requests took, other clients share the quota, and the
// transport pauses at an r up to what they took (the margin), as at r=0. A
// client alone never learns a margin: it sends until r=0.
func TestSharedQuotaPausesBeforeTheOthersTakeWhatIsLeft(t *testing.T) {
	rl := func(r int) answer {
		return answer{status: 200, header: fields("RateLimit-Policy", `"api";q=100;w=1`, "RateLimit", fmt.Sprintf(`"api";r=%d;t=1`, r))}
	}
	refused := answer{status: 429, header: fields("Retry-After", "1", "RateLimit", `"api";r=0;t=1`)}
	for _, tc := range []struct {
		name    string
		answers []answer
		paused  []bool // before each request: a pause of [1s, 1s+jitter)
	}{
		{"alone: r falls by one a request", []answer{rl(5), rl(4), rl(3), rl(2), rl(1)},
			[]bool{false, false, false, false, false}},
		{"alone: time gives units back", []answer{rl(5), rl(30), rl(29), rl(2)},
			[]bool{false, false, false, false}},
		{"shared: others took 29 of 50", []answer{rl(50), rl(20), rl(25), rl(40), rl(39)},
			[]bool{false, false, false, true, false}},
		{"shared: refused after r=3 (a pause for its r=0, then for r=3)", []answer{rl(3), refused, rl(3), rl(50), rl(49)},
			[]bool{false, false, true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := newFakeTime()
			srv := serve(t, ft.Clock, tc.answers...)
			rt := client.NewTransport(nil, ft.options(1, client.WithMaxRetries(0))...)
			for i, paused := range tc.paused {
				before := len(ft.Slept())
				if _, _, err := do(t, rt, get(t, srv.URL)); err != nil {
					t.Fatal(err)
				}
				waits := ft.Slept()[before:]
				switch {
				case paused && (len(waits) != 1 || waits[0] < time.Second || waits[0] >= time.Second+jitterWindow):
					t.Fatalf("request %d: waits %v, want one in [1s, 1.1s): the r heard is within what others take", i, waits)
				case !paused && len(waits) != 0:
					t.Fatalf("request %d: waits %v, want none", i, waits)
				}
			}
		})
	}
}
