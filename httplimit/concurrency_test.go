package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/adaptive"
	"github.com/floodgate-io/floodgate/internal/problem"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/observetest"
)

// recording is an adaptive.Algorithm with a fixed limit that keeps the
// samples it is given: what the middleware told the limiter.
type recording struct {
	limit int
	mu    sync.Mutex
	got   []adaptive.Sample
}

func (a *recording) Limit() int { return a.limit }

func (a *recording) Update(s adaptive.Sample) int {
	a.mu.Lock()
	a.got = append(a.got, s)
	a.mu.Unlock()
	return a.limit
}

func (a *recording) samples() []adaptive.Sample {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]adaptive.Sample(nil), a.got...)
}

func newLimiter(t *testing.T, opts adaptive.LimiterOptions) *adaptive.Limiter {
	t.Helper()
	l, err := adaptive.NewLimiter(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// serveConcurrency runs Concurrency(l, opts) in front of h on a real
// listener. The channel it returns receives once per request after the
// middleware has returned, so after the token's release.
func serveConcurrency(t *testing.T, l *adaptive.Limiter, opts ConcurrencyOptions, h http.HandlerFunc) (string, <-chan struct{}) {
	t.Helper()
	mw, err := Concurrency(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 16)
	inner := mw(h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { done <- struct{}{} }()
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, done
}

// outcome is how a request's token was released, as the algorithm saw it.
type outcome string

const (
	success outcome = "success"
	dropped outcome = "dropped"
	ignored outcome = "ignore"
)

func outcomeOf(t *testing.T, s []adaptive.Sample) outcome {
	t.Helper()
	switch {
	case len(s) == 0:
		return ignored
	case len(s) > 1:
		t.Fatalf("%d samples for one request", len(s))
	case s[0].Dropped:
		return dropped
	}
	return success
}

func TestConcurrencyReleasesByHowTheHandlerEnded(t *testing.T) {
	const timeout = 2 * time.Second
	for _, tc := range []struct {
		name string
		took time.Duration // by the manual clock, inside the handler
		h    func(w http.ResponseWriter)
		want outcome
	}{
		{"200 is a success", 0, func(w http.ResponseWriter) { w.WriteHeader(200) }, success},
		{"a handler that writes nothing sent 200: success", 0, func(http.ResponseWriter) {}, success},
		{"a body without WriteHeader is 200: success", 0, func(w http.ResponseWriter) { io.WriteString(w, "ok") }, success},
		{"404 is the caller's fault, not overload: success", 0, func(w http.ResponseWriter) { w.WriteHeader(404) }, success},
		{"a 103 before 200 is interim: success", 0, func(w http.ResponseWriter) { w.WriteHeader(103); w.WriteHeader(200) }, success},
		{"503 is overload: dropped", 0, func(w http.ResponseWriter) { w.WriteHeader(503) }, dropped},
		{"504 is overload: dropped", 0, func(w http.ResponseWriter) { w.WriteHeader(504) }, dropped},
		{"429 from the backend is overload: dropped", 0, func(w http.ResponseWriter) { w.WriteHeader(429) }, dropped},
		{"500 says nothing about load: ignored", 0, func(w http.ResponseWriter) { w.WriteHeader(500) }, ignored},
		{"502 says nothing about load: ignored", 0, func(w http.ResponseWriter) { w.WriteHeader(502) }, ignored},
		{"exactly the timeout is not past it: success", timeout, func(w http.ResponseWriter) {}, success},
		{"past the timeout is dropped, even with 200", timeout + time.Millisecond, func(w http.ResponseWriter) {}, dropped},
		{"past the timeout is dropped, even with 500", timeout + time.Millisecond, func(w http.ResponseWriter) { w.WriteHeader(500) }, dropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := floodgate.NewManualClock(epoch)
			alg := &recording{limit: 1}
			l := newLimiter(t, adaptive.LimiterOptions{Algorithm: alg, Clock: clock})
			url, done := serveConcurrency(t, l, ConcurrencyOptions{Timeout: timeout, Clock: clock}, func(w http.ResponseWriter, r *http.Request) {
				clock.Advance(tc.took)
				tc.h(w)
			})
			get(t, url)
			<-done
			if got := outcomeOf(t, alg.samples()); got != tc.want {
				t.Errorf("released as %s, want %s", got, tc.want)
			}
			if st := l.Stats(); st.InFlight != 0 {
				t.Errorf("%d still in flight after the request", st.InFlight)
			}
		})
	}
}

func TestConcurrencyIgnoresAClientThatLeft(t *testing.T) {
	alg := &recording{limit: 1}
	l := newLimiter(t, adaptive.LimiterOptions{Algorithm: alg})
	started := make(chan struct{})
	url, done := serveConcurrency(t, l, ConcurrencyOptions{}, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done() // the client went away
		w.WriteHeader(503)   // what a proxy might still write: not a sample
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	go func() { <-started; cancel() }()
	if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v, want context.Canceled", err)
	}
	<-done
	if got := outcomeOf(t, alg.samples()); got != ignored {
		t.Errorf("released as %s, want %s", got, ignored)
	}
	if st := l.Stats(); st.InFlight != 0 {
		t.Errorf("%d still in flight", st.InFlight)
	}
}

func TestConcurrencyReleasesOnPanic(t *testing.T) {
	alg := &recording{limit: 1}
	l := newLimiter(t, adaptive.LimiterOptions{Algorithm: alg})
	url, done := serveConcurrency(t, l, ConcurrencyOptions{}, func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler) // net/http recovers it without logging
	})
	req, _ := http.NewRequest("GET", url, nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	<-done
	if st := l.Stats(); st.InFlight != 0 || len(alg.samples()) != 0 {
		t.Errorf("after a panic: %d in flight, %d samples; want the slot released as ignored", st.InFlight, len(alg.samples()))
	}
}

// fetch sends a request whose answer the test reads elsewhere (from its
// handler), on a goroutine of its own, where t.Fatal may not be called.
func fetch(url string, hdr ...string) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		panic(err) // the test's own URL
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// hold keeps requests in the handler until release is closed.
type hold struct {
	entered chan struct{}
	release chan struct{}
}

func newHold() *hold { return &hold{entered: make(chan struct{}, 64), release: make(chan struct{})} }

func (h *hold) handler(w http.ResponseWriter, r *http.Request) {
	h.entered <- struct{}{}
	<-h.release
}

func TestConcurrencyShedsWith503(t *testing.T) {
	rec := &observetest.Recorder{}
	l := newLimiter(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 10}})
	h := newHold()
	url, done := serveConcurrency(t, l, ConcurrencyOptions{Name: "api", Observer: rec}, h.handler)
	// Seven critical requests fill sheddable's share (70% of 10).
	for range 7 {
		go fetch(url, "X-Priority", "critical")
		<-h.entered
	}
	r := get(t, url, "X-Priority", "Sheddable")
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("sheddable at its share: status %d, want 503", r.status)
	}
	if r.header.Get("Retry-After") != "1" || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("header %v: want Retry-After 1 (no success yet: adaptive's 1s) and a problem body", r.header)
	}
	var body problem.Details
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatal(err)
	}
	if body.Type != problem.OverloadedType || body.Status != 503 || !strings.Contains(body.Detail, "sheddable") {
		t.Errorf("body %+v: want the overloaded type, 503, naming the class", body)
	}
	<-done
	// A default request still fits under its 90% share.
	go fetch(url, "X-Priority", "default")
	<-h.entered
	close(h.release)
	for range 8 {
		<-done
	}
	events := rec.Events()
	if len(events) != 1 {
		t.Fatalf("%d events, want 1 (only the shed request is reported): %+v", len(events), events)
	}
	e := events[0]
	if e.Surface != observe.SurfaceHTTP || e.Policy != "api" || e.Limit != ConcurrencyLimit || e.Key != "sheddable" ||
		e.Outcome != observe.Shed || e.Client != "127.0.0.1" || e.Cost != 1 {
		t.Errorf("event %+v", e)
	}
	if s := rec.Summaries(); len(s) != 1 || s[0].Outcome != observe.Shed || s[0].Policy != "api" || s[0].Limits != 1 {
		t.Errorf("summaries %+v, want one Shed of policy api", s)
	}
	if st := l.Stats(); st.Shed[adaptive.Sheddable][adaptive.ShedAtLimit] != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v: want one sheddable shed at the limit, nothing in flight", st)
	}
}

func TestConcurrencyRetryAfterInWholeSecondsRoundedUp(t *testing.T) {
	for _, tc := range []struct {
		rtt  time.Duration // of the one success before the shed request
		want string
	}{
		{time.Millisecond, "1"}, // at least 1
		{time.Second, "1"},
		{2500 * time.Millisecond, "3"},
	} {
		t.Run(tc.rtt.String(), func(t *testing.T) {
			clock := floodgate.NewManualClock(epoch)
			l := newLimiter(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 1}, Clock: clock})
			h := newHold()
			first := true
			url, done := serveConcurrency(t, l, ConcurrencyOptions{Clock: clock}, func(w http.ResponseWriter, r *http.Request) {
				if first {
					first = false
					clock.Advance(tc.rtt) // the success that sets the smoothed RTT
					return
				}
				h.handler(w, r)
			})
			get(t, url)
			<-done
			go fetch(url)
			<-h.entered
			// RetryAfter = RTT × (1 + 0 queued) ÷ limit 1 = RTT.
			if r := get(t, url, "X-Priority", "critical"); r.status != 503 || r.header.Get("Retry-After") != tc.want {
				t.Errorf("status %d, Retry-After %q; want 503, %q", r.status, r.header.Get("Retry-After"), tc.want)
			}
			close(h.release)
		})
	}
}

func TestConcurrencyAnswersNothingToAClientThatLeftWhileQueued(t *testing.T) {
	rec := &observetest.Recorder{}
	l := newLimiter(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 1}, MaxQueue: 1, MaxWait: time.Hour})
	h := newHold()
	url, done := serveConcurrency(t, l, ConcurrencyOptions{Observer: rec}, h.handler)
	go fetch(url)
	<-h.entered
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	go func() {
		for l.Stats().Queued == 0 {
			runtime.Gosched() // until the second request waits
		}
		cancel()
	}()
	if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v, want context.Canceled", err)
	}
	<-done
	if ev := rec.Events(); len(ev) != 0 {
		t.Errorf("events %+v: a client that left was not shed", ev)
	}
	close(h.release)
	<-done
	if st := l.Stats(); st.InFlight != 0 || st.Queued != 0 {
		t.Errorf("stats %+v: want nothing in flight or queued", st)
	}
}

func TestConcurrencyPriority(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   ConcurrencyOptions
		header [2]string
		want   adaptive.Priority
	}{
		{"critical", ConcurrencyOptions{}, [2]string{"X-Priority", "critical"}, adaptive.Critical},
		{"any case", ConcurrencyOptions{}, [2]string{"x-priority", "SHEDDABLE"}, adaptive.Sheddable},
		{"default", ConcurrencyOptions{}, [2]string{"X-Priority", "default"}, adaptive.Default},
		{"missing is default", ConcurrencyOptions{}, [2]string{}, adaptive.Default},
		{"unknown is default, not an error", ConcurrencyOptions{}, [2]string{"X-Priority", "urgent"}, adaptive.Default},
		{"another header", ConcurrencyOptions{PriorityHeader: "x-criticality"}, [2]string{"X-Criticality", "critical"}, adaptive.Critical},
		{"another header ignores X-Priority", ConcurrencyOptions{PriorityHeader: "X-Criticality"}, [2]string{"X-Priority", "critical"}, adaptive.Default},
		{"a function instead", ConcurrencyOptions{Priority: func(r *http.Request) adaptive.Priority {
			if strings.HasPrefix(r.URL.Path, "/batch/") {
				return adaptive.Sheddable
			}
			return adaptive.Critical
		}}, [2]string{"X-Priority", "critical"}, adaptive.Sheddable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewConcurrencyGate(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/batch/x", nil)
			if tc.header[0] != "" {
				r.Header.Set(tc.header[0], tc.header[1])
			}
			if got := g.Priority(r); got != tc.want {
				t.Errorf("priority %s, want %s", got, tc.want)
			}
		})
	}
}

func TestConcurrencyAnswers500ForAClassThePriorityFunctionMadeUp(t *testing.T) {
	l := newLimiter(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 1}})
	url, done := serveConcurrency(t, l, ConcurrencyOptions{Priority: func(*http.Request) adaptive.Priority { return 7 }},
		func(http.ResponseWriter, *http.Request) { t.Error("handler called") })
	r := get(t, url)
	<-done
	if r.status != 500 || !strings.Contains(r.body, "unknown priority") {
		t.Errorf("status %d, body %s; want 500 naming the unknown priority", r.status, r.body)
	}
}

func TestConcurrencyOptionsAreChecked(t *testing.T) {
	l := newLimiter(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 1}})
	for _, tc := range []struct {
		name string
		l    *adaptive.Limiter
		opts ConcurrencyOptions
		want string // in the error; "" for none
	}{
		{"defaults", l, ConcurrencyOptions{}, ""},
		{"nil limiter", nil, ConcurrencyOptions{}, "nil adaptive.Limiter"},
		{"negative timeout", l, ConcurrencyOptions{Timeout: -time.Second}, "negative Timeout"},
		{"header with a space", l, ConcurrencyOptions{PriorityHeader: "X Priority"}, `PriorityHeader "X Priority"`},
		{"header with a colon", l, ConcurrencyOptions{PriorityHeader: "X-Priority:"}, "not a valid header name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Concurrency(tc.l, tc.opts)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.want != "" && (!errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want ErrInvalidOptions naming %q", err, tc.want)
			}
		})
	}
}

func TestConcurrencyGatePassesANilLimiter(t *testing.T) {
	g, err := NewConcurrencyGate(ConcurrencyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	g.Serve(w, httptest.NewRequest("GET", "/", nil), nil, "route", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	if w.Code != http.StatusTeapot {
		t.Errorf("status %d: a route without a limiter is served as is", w.Code)
	}
}

func TestConcurrencyWriterFlushesAndUnwraps(t *testing.T) {
	l := newLimiter(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 1}})
	url, done := serveConcurrency(t, l, ConcurrencyOptions{}, func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			t.Error("not a Flusher")
		}
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("ResponseController does not reach the connection: %v", err)
		}
		w.(http.Flusher).Flush()
	})
	if r := get(t, url); r.status != 200 {
		t.Errorf("status %d", r.status)
	}
	<-done
}

// discard is a ResponseWriter that keeps nothing, for the allocation
// count.
type discard struct{ h http.Header }

func (d discard) Header() http.Header       { return d.h }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(int)             {}

func admittedPath(tb testing.TB) func() {
	alg, err := adaptive.NewFixed(100)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := adaptive.NewLimiter(adaptive.LimiterOptions{Algorithm: alg})
	if err != nil {
		tb.Fatal(err)
	}
	mw, err := Concurrency(l, ConcurrencyOptions{Timeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	w, r := discard{http.Header{}}, httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Priority", "critical")
	return func() { h.ServeHTTP(w, r) }
}

func TestConcurrencyAdmissionDoesNotAllocate(t *testing.T) {
	serve := admittedPath(t)
	serve() // warm the pools
	if n := testing.AllocsPerRun(100, serve); n != 0 {
		t.Errorf("%.1f allocations per admitted request, want 0", n)
	}
}

func BenchmarkConcurrencyAdmitted(b *testing.B) {
	serve := admittedPath(b)
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
}

func BenchmarkConcurrencyAdmittedParallel(b *testing.B) {
	serve := admittedPath(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			serve()
		}
	})
}
