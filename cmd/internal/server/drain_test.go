package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate-io/floodgate/cmd/internal/listen"
	"github.com/floodgate-io/floodgate/cmd/internal/server"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// withListen sets the harness server's listener options.
func withListen(edit func(*listen.Options)) setup {
	return setup{opts: func(o *server.Options) {
		l := listen.Defaults()
		edit(&l)
		o.Listen = &l
	}}
}

const (
	h2Preface  = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	h2Settings = "\x00\x00\x00\x04\x00\x00\x00\x00\x00" // an empty SETTINGS frame
)

// Connections that hold a listener without using it are closed, no sooner
// than their bound: on gRPC a handshake that never completes (bounded by
// ReadHeaderTimeout, as grpc.ConnectionTimeout) and a connection without
// calls (IdleTimeout, as keepalive MaxConnectionIdle); on HTTP slow
// headers, a slow body and an idle keep-alive connection.
func TestListenersCloseConnectionsThatHoldThem(t *testing.T) {
	const bound = 200 * time.Millisecond
	h := newHarness(t, withListen(func(o *listen.Options) {
		o.ReadHeaderTimeout, o.ReadTimeout, o.IdleTimeout = bound, 2*bound, bound
	}))
	grpcAddr, httpAddr := h.conn.Target(), strings.TrimPrefix(h.url, "http://")
	for _, tc := range []struct {
		name, addr, send string
		bound            time.Duration
	}{
		{"gRPC: nothing sent", grpcAddr, "", bound},
		{"gRPC: only the HTTP/2 preface", grpcAddr, h2Preface, bound},
		{"gRPC: handshake, then no call", grpcAddr, h2Preface + h2Settings, bound},
		{"HTTP: half the headers", httpAddr, "POST /v1/allow HTTP/1.1\r\nHost: x\r\n", bound},
		{"HTTP: half the body", httpAddr, "POST /v1/allow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", 2 * bound},
		{"HTTP: keep-alive connection left idle", httpAddr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", bound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if took := servicetest.ClosedAfter(t, tc.addr, tc.send); took < tc.bound {
				t.Fatalf("closed after %v, before its bound %v", took, tc.bound)
			}
		})
	}
}

// manualGrace is a grace period the test ends by hand.
type manualGrace struct {
	end  chan time.Time
	once sync.Once
}

func (g *manualGrace) after(time.Duration) <-chan time.Time { return g.end }
func (g *manualGrace) stop()                                { g.once.Do(func() { close(g.end) }) }

// The drain of floodgate serve: once the context ends, /readyz and gRPC
// health fail at once while the listeners keep answering, each HTTP
// answer with Connection: close, so keep-alive clients move off without
// a failed request; then the listeners close and Serve returns nil.
func TestServeDrainsKeepAliveClients(t *testing.T) {
	grace := &manualGrace{end: make(chan time.Time)}
	s := withListen(func(o *listen.Options) { o.ShutdownDelay = time.Hour }) // ended by hand
	edit := s.opts
	s.opts = func(o *server.Options) { edit(o); o.GraceTimer = grace.after }
	h := newHarness(t, s)
	t.Cleanup(grace.stop) // before the harness's cleanup waits for Serve

	load := servicetest.StartKeepAliveLoad(h.url+"/v1/allow", lookup(0, "user", "ann"), 8)
	defer load.Stop()
	if err := load.WaitEach(timing.Patience, "been answered", func(c servicetest.LoadTally) bool { return c.OK > 0 }); err != nil {
		t.Fatal(err)
	}
	h.cancel()
	// Readiness fails first; the service still answers. Serve sees the
	// context end on its own goroutine, so the first answers may still come
	// from before the drain began: ask until readiness fails.
	resp := readyzWhenDraining(t, h)
	if !resp.Close {
		t.Fatalf("/readyz while draining: 503 without Connection: close")
	}
	st, err := h.health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || st.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("gRPC health while draining: %v, %v; want NOT_SERVING", st, err)
	}
	if r := h.post("/v1/allow", lookup(0, "user", "bob")); r.status != 200 {
		t.Fatalf("/v1/allow while draining: %d %s", r.status, r.body)
	}
	if err := load.WaitEach(timing.Patience, "been answered with Connection: close twice", func(c servicetest.LoadTally) bool {
		return c.Closing >= 2
	}); err != nil {
		t.Fatal(err)
	}
	grace.stop()
	if err := <-h.served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	h.served = nil
	total := load.Stop()
	t.Logf("keep-alive load through the drain: %v", total)
	if total.Failed != 0 {
		t.Fatalf("%v; want none failed on a reused connection: %q", total, total.Errors)
	}
}

// readyzWhenDraining asks /readyz until it answers 503 (within
// timing.Patience) and returns that answer.
func readyzWhenDraining(t *testing.T, h *harness) *http.Response {
	t.Helper()
	for deadline := time.Now().Add(timing.Patience); ; {
		resp, err := h.http.Get(h.url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			return resp
		}
		if resp.StatusCode != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("/readyz after the context ended: %d, want 503 within %v", resp.StatusCode, timing.Patience)
		}
		time.Sleep(time.Millisecond)
	}
}
