package client_test

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/client"
	"github.com/floodgate-io/floodgate/client/clienttest"
)

// fakeTime is the tests' time: a manual clock and a sleeper that moves it.
type fakeTime struct{ *clienttest.Time }

func newFakeTime() *fakeTime { return &fakeTime{clienttest.NewTime()} }

// options are a deterministic transport's: fake time and a seeded source.
func (f *fakeTime) options(seed uint64, more ...client.Option) []client.Option {
	return append([]client.Option{f.Option(), client.WithRand(rand.New(rand.NewPCG(seed, 0)))}, more...)
}

// answer is one scripted response; header sees the server's (fake) time.
type answer struct {
	status int
	header func(now time.Time) http.Header
	body   string
}

func fields(kv ...string) func(time.Time) http.Header {
	return func(time.Time) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
}

var ok = answer{status: http.StatusOK, body: "ok"}

// received is one request as the server saw it.
type received struct {
	method string
	body   string
	at     time.Time
}

// script is a real HTTP server on 127.0.0.1 that gives its answers in
// order, the last one to every request after, and records what it got.
type script struct {
	*httptest.Server
	clock   floodgate.Clock
	mu      sync.Mutex
	answers []answer
	got     []received
}

func serve(t *testing.T, clock floodgate.Clock, answers ...answer) *script {
	t.Helper()
	return serveWrapped(t, clock, func(h http.Handler) http.Handler { return h }, answers...)
}

// serveWrapped is serve with wrap around the script's handler.
func serveWrapped(t *testing.T, clock floodgate.Clock, wrap func(http.Handler) http.Handler, answers ...answer) *script {
	t.Helper()
	s := &script{clock: clock, answers: answers}
	s.Server = httptest.NewServer(wrap(http.HandlerFunc(s.handle)))
	t.Cleanup(s.Close)
	return s
}

// constRand is a source whose every Float64 is f.
func constRand(f float64) *rand.Rand { return rand.New(fixedSource(f * (1 << 53))) }

type fixedSource uint64

func (s fixedSource) Uint64() uint64 { return uint64(s) }

func (s *script) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	now := s.clock.Now()
	s.mu.Lock()
	a := s.answers[min(len(s.got), len(s.answers)-1)]
	s.got = append(s.got, received{r.Method, string(body), now})
	s.mu.Unlock()
	if a.header != nil {
		for k, v := range a.header(now) {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func (s *script) requests() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.got...)
}

// do sends a request through rt and returns the status and body, or the
// error.
func do(t *testing.T, rt http.RoundTripper, req *http.Request) (int, string, error) {
	t.Helper()
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp.StatusCode, string(b), nil
}

func get(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
