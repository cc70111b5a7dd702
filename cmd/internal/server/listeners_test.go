package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/listen"
	"github.com/floodgate-io/floodgate/cmd/internal/server"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// TestPprofBehindToken: /debug/pprof/ answers only with the admin token,
// and not at all when no token is configured.
func TestPprofBehindToken(t *testing.T) {
	h := newHarness(t, setup{})
	off := newHarness(t, setup{opts: func(o *server.Options) { o.AdminToken = "" }})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1"} {
		for _, tc := range []struct {
			name   string
			h      *harness
			auth   string
			status int
		}{
			{"the token", h, "Bearer s3cret", 200},
			{"no token", h, "", 401},
			{"a wrong token", h, "Bearer s3cre", 401},
			{"no token configured", off, "Bearer s3cret", 404},
		} {
			r := tc.h.do("GET", path, "", "Authorization", tc.auth)
			if r.status != tc.status {
				t.Errorf("%s with %s: %d, want %d: %.200s", path, tc.name, r.status, tc.status, r.body)
			}
		}
	}
}

// tlsClient is an HTTPS client that trusts ca and presents cert (nil:
// none).
func tlsClient(t *testing.T, ca *testkit.CA, cert *testkit.Cert) *http.Client {
	t.Helper()
	conf := &tls.Config{RootCAs: ca.Pool()}
	if cert != nil {
		conf.Certificates = []tls.Certificate{cert.TLS(t)}
	}
	tr := &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timing.Patience}
}

func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestAdminListenerOverMTLS is serve with --tls-cert, --tls-client-ca and
// --admin: HTTP and gRPC answer clients with a certificate, the admin
// listener takes /admin, /metrics and /debug/pprof/ off the HTTP listener
// and answers probes that have no certificate.
func TestAdminListenerOverMTLS(t *testing.T) {
	ca := testkit.NewCA(t, "CA")
	certFile, keyFile := ca.IssueCert(t, "floodgate").Files(t)
	tl, err := listen.LoadTLS(listen.TLSFiles{Cert: certFile, Key: keyFile, ClientCA: ca.File(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := listen.Defaults()
	opts.TLS = tl
	srv := server.New(server.Options{
		Engine:     engine.New(servicetest.Policies(t, policy), engine.OneStore{Limiter: floodgate.NewMemory()}),
		AdminToken: "s3cret",
		Listen:     &opts,
	})
	httpLn, grpcLn, adminLn := servicetest.Loopback(t), servicetest.Loopback(t), servicetest.Loopback(t)
	servicetest.Serve(t, func(ctx context.Context) error {
		return srv.ServeListeners(ctx, server.Listeners{HTTP: httpLn, GRPC: grpcLn, Admin: adminLn})
	})
	client := ca.IssueCert(t, "envoy")
	withCert, without := tlsClient(t, ca, client), tlsClient(t, ca, nil)
	main, admin := "https://"+httpLn.Addr().String(), "https://"+adminLn.Addr().String()

	for _, tc := range []struct {
		url, token string
		status     int
	}{
		{main + "/healthz", "", 200},
		{main + "/metrics", "", 404},
		{main + "/admin/policies", "s3cret", 404},
		{main + "/debug/pprof/", "s3cret", 404},
		{admin + "/healthz", "", 200},
		{admin + "/readyz", "", 200},
		{admin + "/metrics", "", 200},
		{admin + "/admin/policies", "s3cret", 200},
		{admin + "/admin/policies", "", 401},
		{admin + "/debug/pprof/", "s3cret", 200},
		{admin + "/debug/pprof/", "", 401},
		{admin + "/v1/allow", "", 404},
	} {
		c := withCert
		if strings.HasPrefix(tc.url, admin) {
			c = without
		}
		status, body := get(t, c, tc.url, tc.token)
		if status != tc.status {
			t.Errorf("GET %s (token %q): %d, want %d: %.200s", tc.url, tc.token, status, tc.status, body)
		}
		if strings.HasPrefix(tc.url, main) && status == 404 && !strings.Contains(body, "served on the admin listener") {
			t.Errorf("GET %s: %s, want it to name the admin listener", tc.url, body)
		}
	}

	// Envoy's call over mTLS.
	conn, err := grpc.NewClient(grpcLn.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(
		&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLS(t)}})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain:      "api",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "ann"}}}},
	})
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit over mTLS: %v %v, want OK", resp.GetOverallCode(), err)
	}
}
