package httplimit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// tokensPerMinute is the reconciled rule of these tests: 1000 tokens a
// minute per API key; the client's X-Max-Tokens is the estimate and the
// response reports the tokens used.
func tokensPerMinute(actual ActualFunc) Rule {
	return Rule{
		Name:   "tpm",
		Limit:  floodgate.PerMinute(1000),
		Key:    ByHeader("X-Api-Key"),
		Cost:   CostFromHeader("X-Max-Tokens"),
		Actual: actual,
	}
}

// frozenMemory is a store whose clock stands still at epoch: what a test
// takes stays taken.
func frozenMemory() *floodgate.Memory {
	return floodgate.NewMemory(floodgate.WithClock(floodgate.NewManualClock(epoch)))
}

// llm is an LLM-like handler: it streams a short answer and reports the
// tokens it used (what the test asks for in X-Use) where where says: in the
// header "X-Tokens-Used", in the declared trailer of that name, or in a
// trailer set with http.TrailerPrefix.
func llm(where string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		used := r.Header.Get("X-Use")
		switch where {
		case "header":
			w.Header().Set("X-Tokens-Used", used)
		case "trailer":
			w.Header().Set("Trailer", "X-Tokens-Used")
		}
		for _, word := range []string{"data: one\n", "data: two\n"} {
			io.WriteString(w, word)
			w.(http.Flusher).Flush()
		}
		switch where {
		case "trailer":
			w.Header().Set("X-Tokens-Used", used)
		case "prefix":
			w.Header().Set(http.TrailerPrefix+"X-Tokens-Used", used)
		}
	}
}

// call sends one request for key with an estimate, asking the handler to
// report used tokens.
func call(t *testing.T, url, key string, estimate, used int64) response {
	t.Helper()
	return get(t, url, "X-Api-Key", key, "X-Max-Tokens", strconv.FormatInt(estimate, 10), "X-Use", strconv.FormatInt(used, 10))
}

// left reads the tokens key has left without taking any: estimate 0, used 0.
func left(t *testing.T, url, key string) int64 {
	t.Helper()
	r := call(t, url, key, 0, 0)
	if r.status != 200 {
		t.Fatalf("reading %s's tokens: %d %s", key, r.status, r.body)
	}
	return fields(t, r.header)["tpm"]["r"]
}

func TestReconcileChargesTheActualAmount(t *testing.T) {
	for _, where := range []string{"header", "trailer", "prefix"} {
		actual := ActualFromTrailer("x-tokens-used")
		if where == "header" {
			actual = ActualFromHeader("x-tokens-used")
		}
		for _, tc := range []struct {
			name             string
			estimate, used   int64
			wantReserved     int64 // r on the response itself: the estimate is taken
			wantLeftAfterAll int64 // r on the next request: the actual amount is taken
		}{
			{"under-estimate charged in full", 100, 400, 900, 600},
			{"over-estimate refunded", 500, 50, 500, 950},
			{"exact estimate", 200, 200, 800, 800},
			{"nothing used", 300, 0, 700, 1000},
		} {
			t.Run(where+"/"+tc.name, func(t *testing.T) {
				url := serve(t, frozenMemory(), Options{Rules: []Rule{tokensPerMinute(actual)}}, llm(where))
				r := call(t, url, "k", tc.estimate, tc.used)
				if r.status != 200 || r.body != "data: one\ndata: two\n" {
					t.Fatalf("%d %q", r.status, r.body)
				}
				if got := fields(t, r.header)["tpm"]["r"]; got != tc.wantReserved {
					t.Errorf("r on the response = %d, want %d (the estimate)", got, tc.wantReserved)
				}
				if got := left(t, url, "k"); got != tc.wantLeftAfterAll {
					t.Errorf("r on the next request = %d, want %d (the actual amount)", got, tc.wantLeftAfterAll)
				}
				if got := left(t, url, "other"); got != 1000 {
					t.Errorf("another key was charged: r = %d", got)
				}
			})
		}
	}
}

func TestReconcileRefundsNeverBeyondFull(t *testing.T) {
	clock := floodgate.NewManualClock(epoch)
	slow := llm("header")
	url := serve(t, floodgate.NewMemory(floodgate.WithClock(clock)), Options{Rules: []Rule{tokensPerMinute(ActualFromHeader("X-Tokens-Used"))}},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Slow") != "" {
				clock.Advance(time.Minute) // a long generation
			}
			slow(w, r)
		}))
	// 600 reserved; the answer takes a minute, in which the bucket refills
	// to full, and uses nothing. Refunding the 600 would leave 1600.
	if r := get(t, url, "X-Api-Key", "k", "X-Max-Tokens", "600", "X-Use", "0", "X-Slow", "1"); r.status != 200 {
		t.Fatal(r.status)
	}
	if got := left(t, url, "k"); got != 1000 {
		t.Fatalf("after a full refund r = %d, want 1000", got)
	}
	if r := call(t, url, "k", 1000, 1000); r.status != 200 {
		t.Fatalf("a full bucket: %d", r.status)
	}
	if r := call(t, url, "k", 1, 1); r.status != 429 {
		t.Fatalf("the refund left more than a full bucket: %d", r.status)
	}
}

// TestReconcileChargesOverrunsInFull: a response that used more than the
// key had left is charged anyway (the work was done), and the requests
// after it wait. How long is the store's to say: a bucket carries at most
// an empty bucket's debt, a fixed window counts it all until it ends.
func TestReconcileChargesOverrunsInFull(t *testing.T) {
	for _, tc := range []struct {
		name         string
		limit        floodgate.Limit
		early, ready time.Duration // a token is not there yet, is there
		retryAfter   string
	}{
		{"token bucket: empty, refilling a token per 60ms", floodgate.PerMinute(1000), 59 * time.Millisecond, 61 * time.Millisecond, "1"},
		{"fixed window: 1600 of 1000 counted until the window ends", floodgate.PerMinute(1000).WithAlgorithm(floodgate.FixedWindow),
			time.Minute - time.Millisecond, time.Minute, "60"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := floodgate.NewManualClock(epoch)
			rule := tokensPerMinute(ActualFromHeader("X-Tokens-Used"))
			rule.Limit = tc.limit
			url := serve(t, floodgate.NewMemory(floodgate.WithClock(clock)), Options{Rules: []Rule{rule}}, llm("header"))
			if r := call(t, url, "k", 100, 1600); r.status != 200 {
				t.Fatal(r.status)
			}
			r := call(t, url, "k", 1, 1)
			if r.status != 429 || r.header.Get("Retry-After") != tc.retryAfter {
				t.Fatalf("after the overrun: %d, Retry-After %q, want 429 and %q", r.status, r.header.Get("Retry-After"), tc.retryAfter)
			}
			clock.Advance(tc.early)
			if r := call(t, url, "k", 1, 1); r.status != 429 {
				t.Fatalf("before the wait is over: %d", r.status)
			}
			clock.Advance(tc.ready - tc.early)
			if r := call(t, url, "k", 1, 1); r.status != 200 {
				t.Fatalf("after the wait: %d", r.status)
			}
		})
	}
}

func TestReconcileOnlyReconciledRules(t *testing.T) {
	url := serve(t, frozenMemory(), Options{Rules: []Rule{
		{Name: "rpm", Limit: floodgate.PerMinute(100), Key: ByHeader("X-Api-Key")},
		tokensPerMinute(ActualFromHeader("X-Tokens-Used")),
	}}, llm("header"))
	if r := call(t, url, "k", 10, 700); r.status != 200 {
		t.Fatal(r.status)
	}
	f := fields(t, call(t, url, "k", 0, 0).header)
	if f["rpm"]["r"] != 98 || f["tpm"]["r"] != 300 {
		t.Fatalf("rpm r=%d (want 98: one per request), tpm r=%d (want 300)", f["rpm"]["r"], f["tpm"]["r"])
	}
}

// TestReconcileStreamsAndFlushes checks that a streamed body reaches the
// client chunk by chunk through the middleware (whichever way the handler
// flushes) and that the trailer sent after it is charged.
func TestReconcileStreamsAndFlushes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flush func(w http.ResponseWriter)
	}{
		{"http.Flusher", func(w http.ResponseWriter) { w.(http.Flusher).Flush() }},
		{"http.ResponseController", func(w http.ResponseWriter) {
			if err := http.NewResponseController(w).Flush(); err != nil {
				panic(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Trailer", "X-Tokens-Used")
				io.WriteString(w, "data: first\n")
				tc.flush(w)
				<-release // the client must see the first chunk while we still hold the rest
				io.WriteString(w, "data: last\n")
				w.Header().Set("X-Tokens-Used", "321")
			})
			url := serve(t, frozenMemory(),
				Options{Rules: []Rule{tokensPerMinute(ActualFromTrailer("X-Tokens-Used"))}}, handler)
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("X-Api-Key", "k")
			req.Header.Set("X-Max-Tokens", "50")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				close(release)
				t.Fatal(err)
			}
			defer resp.Body.Close()
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			close(release)
			if err != nil || line != "data: first\n" {
				t.Fatalf("first chunk %q, %v", line, err)
			}
			if _, err := io.ReadAll(resp.Body); err != nil {
				t.Fatal(err)
			}
			if got := resp.Trailer.Get("X-Tokens-Used"); got != "321" {
				t.Fatalf("trailer %q", got)
			}
			if got := left(t, url, "k"); got != 1000-321 {
				t.Fatalf("r = %d, want %d", got, 1000-321)
			}
		})
	}
}

// cancellable is a store that, like a network store, refuses calls whose
// context is done.
type cancellable struct{ floodgate.Adjuster }

func (c cancellable) Adjust(ctx context.Context, key string, l floodgate.Limit, delta int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.Adjuster.Adjust(ctx, key, l, delta)
}

// TestReconcileClientLeaves: a client that hangs up mid-stream is charged
// for the tokens generated until the handler noticed: the work was done,
// and the correction does not die with the request's context.
func TestReconcileClientLeaves(t *testing.T) {
	var mu sync.Mutex
	var reconcileErrs []error
	mw, err := New(cancellable{frozenMemory()}, Options{
		Rules: []Rule{tokensPerMinute(ActualFromTrailer("X-Tokens-Used"))},
		OnReconcileError: func(_ *http.Request, err error) {
			mu.Lock()
			reconcileErrs = append(reconcileErrs, err)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 1)
	inner := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Tokens-Used")
		io.WriteString(w, "data: first\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // generating until the client goes away
		w.Header().Set("X-Tokens-Used", "700")
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r)
		done <- struct{}{} // the middleware has returned: reconciliation is over
	}))
	defer srv.Close()

	ctx, hangUp := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	req.Header.Set("X-Api-Key", "k")
	req.Header.Set("X-Max-Tokens", "100")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "data: first\n" {
		t.Fatalf("first chunk %q, %v", line, err)
	}
	hangUp()
	resp.Body.Close()
	select {
	case <-done:
	case <-time.After(timing.Patience):
		t.Fatal("the handler did not notice the client leaving")
	}
	mu.Lock()
	failed := reconcileErrs
	mu.Unlock()
	if len(failed) != 0 {
		t.Fatalf("reconciliation failed: %v", failed)
	}
	if got := leftIn(t, mw, "k"); got != 300 {
		t.Fatalf("r = %d, want 300: the 700 tokens generated are charged", got)
	}
}

// leftIn reads key's tokens through mw in process, with a handler that
// returns at once (the handler of TestReconcileClientLeaves waits for its
// client to leave).
func leftIn(t *testing.T, mw func(http.Handler) http.Handler, key string) int64 {
	t.Helper()
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Tokens-Used")
		w.Header().Set("X-Tokens-Used", "0")
	}))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Api-Key", key)
	r.Header.Set("X-Max-Tokens", "0")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("reading %s's tokens: %d", key, w.Code)
	}
	return fields(t, w.Header())["tpm"]["r"]
}

func TestReconcileKeepsTheEstimateWithoutAUsableAmount(t *testing.T) {
	for _, tc := range []struct {
		name    string
		actual  ActualFunc
		handler http.HandlerFunc
		want    string // in the error
	}{
		{"missing header", ActualFromHeader("X-Tokens-Used"), func(http.ResponseWriter, *http.Request) {},
			"missing response header X-Tokens-Used"},
		{"malformed header", ActualFromHeader("X-Tokens-Used"), func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Tokens-Used", "12 tokens")
		}, `response header X-Tokens-Used must be a non-negative integer, got "12 tokens"`},
		{"megabyte header quoted as an excerpt", ActualFromHeader("X-Tokens-Used"), func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Tokens-Used", strings.Repeat("9", 1<<20)+"x")
		}, `got "` + strings.Repeat("9", 32) + `…" (1048577 bytes)`},
		{"header given twice", ActualFromHeader("X-Tokens-Used"), func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Add("X-Tokens-Used", "1")
			w.Header().Add("X-Tokens-Used", "2")
		}, "given 2 times"},
		{"header set after the body went out", ActualFromHeader("X-Tokens-Used"), func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "answer")
			w.Header().Set("X-Tokens-Used", "9") // too late: never sent
		}, "missing response header X-Tokens-Used"},
		{"trailer never set", ActualFromTrailer("X-Tokens-Used"), func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Trailer", "X-Tokens-Used")
			io.WriteString(w, "answer")
		}, "missing response trailer X-Tokens-Used"},
		{"negative trailer", ActualFromTrailer("X-Tokens-Used"), func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set(http.TrailerPrefix+"X-Tokens-Used", "-5")
		}, `got "-5"`},
		{"ActualFunc fails", func(*Response) (int64, error) { return 0, errors.New("usage block missing") },
			func(http.ResponseWriter, *http.Request) {}, "usage block missing"},
		{"ActualFunc negative", func(*Response) (int64, error) { return -3, nil },
			func(http.ResponseWriter, *http.Request) {}, "negative amount -3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []error
			var mu sync.Mutex
			url := serve(t, frozenMemory(), Options{
				Rules: []Rule{tokensPerMinute(tc.actual)},
				OnReconcileError: func(_ *http.Request, err error) {
					mu.Lock()
					got = append(got, err)
					mu.Unlock()
				},
			}, tc.handler)
			if r := get(t, url, "X-Api-Key", "k", "X-Max-Tokens", "250"); r.status != 200 {
				t.Fatalf("the response itself: %d", r.status)
			}
			mu.Lock()
			errs := append([]error(nil), got...)
			mu.Unlock()
			if len(errs) != 1 {
				t.Fatalf("OnReconcileError called with %v, want one error", errs)
			}
			var re *ReconcileError
			if !errors.As(errs[0], &re) || !errors.Is(errs[0], ErrBadActual) ||
				re.Rule != "tpm" || re.Estimate != 250 || re.Delta != 0 ||
				!strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("error %v (%#v), want a *ReconcileError for tpm wrapping ErrBadActual, saying %q", errs[0], re, tc.want)
			}
			r := get(t, url, "X-Api-Key", "k", "X-Max-Tokens", "0")
			if f := fields(t, r.header)["tpm"]; f["r"] != 750 {
				t.Fatalf("r = %d, want 750: the estimate stays charged", f["r"])
			}
		})
	}
}

func TestReconcileErrorsAreLoggedByDefault(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	url := serve(t, frozenMemory(), Options{
		Rules:  []Rule{tokensPerMinute(ActualFromHeader("X-Tokens-Used"))},
		Logger: logger,
	}, nil)
	if r := get(t, url, "X-Api-Key", "k", "X-Max-Tokens", "5"); r.status != 200 {
		t.Fatal(r.status)
	}
	mu.Lock()
	defer mu.Unlock()
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "missing response header X-Tokens-Used") {
		t.Fatalf("log %q", out)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// brokenAdjust is a store whose corrections fail.
type brokenAdjust struct{ floodgate.Adjuster }

func (brokenAdjust) Adjust(context.Context, string, floodgate.Limit, int64) error {
	return errors.Join(floodgate.ErrStoreUnavailable, errors.New("connection refused"))
}

func TestReconcileReportsAFailedAdjustment(t *testing.T) {
	var got error
	done := make(chan struct{}, 1)
	url := serve(t, brokenAdjust{frozenMemory()}, Options{
		Rules: []Rule{tokensPerMinute(ActualFromHeader("X-Tokens-Used"))},
		OnReconcileError: func(_ *http.Request, err error) {
			got = err
			done <- struct{}{}
		},
	}, llm("header"))
	if r := call(t, url, "k", 10, 70); r.status != 200 {
		t.Fatalf("the response does not depend on the correction: %d", r.status)
	}
	<-done
	var re *ReconcileError
	if !errors.As(got, &re) || re.Delta != 60 || !errors.Is(got, floodgate.ErrStoreUnavailable) || errors.Is(got, ErrBadActual) ||
		!strings.Contains(got.Error(), "+60") {
		t.Fatalf("error %v", got)
	}
	// An exact estimate needs no correction, so nothing can fail.
	if r := call(t, url, "k", 10, 10); r.status != 200 {
		t.Fatal(r.status)
	}
	select {
	case <-done:
		t.Fatal("Adjust called for a zero correction")
	default:
	}
}

// TestResponseAsSent checks what an ActualFunc sees: the status and header
// section the client got, the trailers, and the body's size.
func TestResponseAsSent(t *testing.T) {
	for _, tc := range []struct {
		name        string
		handler     http.HandlerFunc
		wantStatus  int
		wantHeader  string // X-A in the header section
		wantTrailer string // X-T in the trailers
		wantBytes   int64
	}{
		{"nothing written", func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("X-A", "1") }, 200, "1", "", 0},
		{"explicit status", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-A", "2")
			w.WriteHeader(http.StatusCreated)
			w.Header().Set("X-A", "changed too late")
			io.WriteString(w, "abc")
		}, 201, "2", "", 3},
		{"interim response first", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Set("X-A", "3")
			w.WriteHeader(http.StatusAccepted)
		}, 202, "3", "", 0},
		{"declared trailer", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Trailer", "X-T")
			io.WriteString(w, "hello")
			w.Header().Set("X-T", "4")
		}, 200, "", "4", 5},
		{"prefixed trailer", func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "hi")
			w.Header().Set(http.TrailerPrefix+"x-t", "5")
		}, 200, "", "5", 2},
		{"flushed before any write", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-A", "6")
			w.(http.Flusher).Flush()
			w.Header().Set("X-A", "changed too late")
		}, 200, "6", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan *Response, 1)
			url := serve(t, frozenMemory(), Options{
				Rules: []Rule{{Limit: floodgate.PerMinute(10), Key: Constant("x"), Actual: func(resp *Response) (int64, error) {
					seen <- resp
					return 1, nil
				}}},
			}, tc.handler)
			r := get(t, url)
			resp := <-seen
			if resp.Status != tc.wantStatus || r.status != tc.wantStatus {
				t.Errorf("status %d, client got %d, want %d", resp.Status, r.status, tc.wantStatus)
			}
			if got := resp.Header.Get("X-A"); got != tc.wantHeader || got != r.header.Get("X-A") {
				t.Errorf("header X-A %q, client got %q, want %q", got, r.header.Get("X-A"), tc.wantHeader)
			}
			if got := resp.Trailer.Get("X-T"); got != tc.wantTrailer {
				t.Errorf("trailer X-T %q, want %q", got, tc.wantTrailer)
			}
			if resp.Header.Get("RateLimit") == "" || resp.Request == nil || resp.Request.URL.Path != "/" {
				t.Errorf("response %+v", resp)
			}
			if resp.BodyBytes != tc.wantBytes {
				t.Errorf("body bytes %d, want %d", resp.BodyBytes, tc.wantBytes)
			}
			for k := range resp.Header {
				if strings.HasPrefix(k, http.TrailerPrefix) {
					t.Errorf("header section holds %q, which is never sent", k)
				}
			}
		})
	}
}

// TestResponseControllerReachesTheConnection: deadlines and full duplex
// work through the middleware's writer (it unwraps).
func TestResponseControllerReachesTheConnection(t *testing.T) {
	errs := make(chan error, 2)
	url := serve(t, frozenMemory(), Options{Rules: []Rule{
		{Limit: floodgate.PerMinute(10), Key: Constant("x"), Actual: func(*Response) (int64, error) { return 1, nil }},
	}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		errs <- rc.SetWriteDeadline(time.Now().Add(time.Minute))
		errs <- rc.EnableFullDuplex()
	}))
	if r := get(t, url); r.status != 200 {
		t.Fatal(r.status)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("through the middleware: %v", err)
		}
	}
}

// plain is a store without Adjust.
type plain struct{ l floodgate.Limiter }

func (p plain) AllowN(ctx context.Context, key string, l floodgate.Limit, cost int64) (floodgate.Decision, error) {
	return p.l.AllowN(ctx, key, l, cost)
}

func TestReconcileNeedsAnAdjuster(t *testing.T) {
	store := plain{floodgate.NewMemory()}
	tokens := tokensPerMinute(ActualFromHeader("X-Tokens-Used"))
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"rule", Options{Rules: []Rule{tokens}}, `"tpm"`},
		{"plan's rule", Options{Tiers: &Tiers{Header: "X-Plan", Plans: map[string][]Rule{"free": nil, "pro": {tokens}}}}, `"pro/tpm"`},
	} {
		_, err := New(store, tc.opts)
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "floodgate.Adjuster") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	tokens.Actual = nil // without reconciliation any store does
	if _, err := New(store, Options{Rules: []Rule{tokens}}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(store, Options{Rules: []Rule{tokens}, ReconcileTimeout: -time.Second}); !errors.Is(err, ErrInvalidOptions) ||
		!strings.Contains(err.Error(), "ReconcileTimeout") {
		t.Fatalf("negative ReconcileTimeout: %v", err)
	}
}

func TestFixedCost(t *testing.T) {
	url := serve(t, frozenMemory(), Options{Rules: []Rule{
		{Name: "fixed", Limit: floodgate.PerMinute(1000), Key: Constant("x"), Cost: FixedCost(300)},
		{Name: "broken", Limit: floodgate.PerMinute(1000), Key: ByHeader("X-Broken"), Cost: FixedCost(-1)},
	}, Missing: Pass}, nil)
	if r := get(t, url); r.status != 200 || fields(t, r.header)["fixed"]["r"] != 700 {
		t.Fatalf("%d %v", r.status, r.header)
	}
	r := get(t, url, "X-Broken", "1")
	if r.status != 400 || !strings.Contains(decodeProblem(t, r)["detail"].(string), `"broken": fixed cost -1 is negative`) {
		t.Fatalf("%d %s", r.status, r.body)
	}
}
