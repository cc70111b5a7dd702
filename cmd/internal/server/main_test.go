package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/server"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

func TestMain(m *testing.M) {
	// testkit starts redis-server from one long-lived goroutine.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/floodgate-io/floodgate/internal/testkit.spawner"))
}

// The policy of most tests. Its clock starts on a minute boundary, so a
// fresh per-minute window resets in exactly 60s.
var policy = servicetest.APIPolicy + `  - key: report
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 7}
  - key: hourly
    rate_limit: {name: hourly, period: 2h, requests_per_unit: 10}
` + servicetest.TokenLimits(3, 1000)

var start = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

// harness is a server on real loopback listeners, with clients.
type harness struct {
	t       *testing.T
	clock   *floodgate.ManualClock
	mem     *floodgate.Memory
	engine  *engine.Engine
	srv     *server.Server
	url     string
	http    *http.Client
	conn    *grpc.ClientConn
	rls     rlsv3.RateLimitServiceClient
	health  healthpb.HealthClient
	logs    *servicetest.SyncBuffer
	cancel  context.CancelFunc
	served  chan error
	reloads atomic.Int32
	resets  []string
	resetMu sync.Mutex
	notOK   atomic.Pointer[string] // readiness problem, nil when ready
}

type setup struct {
	opts   func(*server.Options)
	store  floodgate.Limiter // the engine's store; default the harness Memory
	policy string            // the policy YAML; default policy
}

func newHarness(t *testing.T, s setup) *harness {
	t.Helper()
	h := &harness{t: t, clock: floodgate.NewManualClock(start), logs: &servicetest.SyncBuffer{}}
	h.mem = floodgate.NewMemory(floodgate.WithClock(h.clock))
	store := s.store
	if store == nil {
		store = h.mem
	}
	yaml := policy
	if s.policy != "" {
		yaml = s.policy
	}
	h.engine = engine.New(servicetest.Policies(t, yaml), engine.OneStore{Limiter: store})
	opts := server.Options{
		Engine:     h.engine,
		Limiter:    h.mem,
		Logger:     slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		AdminToken: "s3cret",
		Ready: func() error {
			if p := h.notOK.Load(); p != nil {
				return errors.New(*p)
			}
			return nil
		},
		Reload: func() error {
			h.reloads.Add(1)
			return nil
		},
		Reset: func(ctx context.Context, key string) error {
			h.resetMu.Lock()
			h.resets = append(h.resets, key)
			h.resetMu.Unlock()
			return h.mem.Reset(ctx, key)
		},
		Headers: true,
		Clock:   h.clock,
	}
	if s.opts != nil {
		s.opts(&opts)
	}
	h.srv = server.New(opts)
	httpLn, grpcLn := servicetest.Loopback(t), servicetest.Loopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.served = make(chan error, 1)
	go func() { h.served <- h.srv.Serve(ctx, httpLn, grpcLn) }()
	h.url = "http://" + httpLn.Addr().String()
	h.http = &http.Client{Transport: &http.Transport{}, Timeout: timing.Patience}
	var err error
	h.conn, err = grpc.NewClient(grpcLn.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h.rls = rlsv3.NewRateLimitServiceClient(h.conn)
	h.health = healthpb.NewHealthClient(h.conn)
	t.Cleanup(h.stop)
	return h
}

// stop cancels Serve and waits for it; it may be called more than once.
func (h *harness) stop() {
	h.cancel()
	if h.served != nil {
		if err := <-h.served; err != nil {
			h.t.Errorf("Serve: %v", err)
		}
		h.served = nil
	}
	h.conn.Close()
	h.http.Transport.(*http.Transport).CloseIdleConnections()
}

// response is an HTTP answer, read.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

func (h *harness) do(method, path, body string, hdr ...string) response {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func (h *harness) post(path, body string) response {
	h.t.Helper()
	return h.do(http.MethodPost, path, body, "Content-Type", "application/json")
}

func (h *harness) admin(method, path, body string) response {
	h.t.Helper()
	return h.do(method, path, body, "Authorization", "Bearer s3cret")
}

// num reads a JSON number field.
func num(t *testing.T, m map[string]any, key string) int64 {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok {
		t.Fatalf("field %q missing or not a number in %v", key, m)
	}
	return int64(v)
}
