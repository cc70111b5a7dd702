package cli

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// A TLS flag that cannot serve stops serve and the proxy at start, with
// an error naming the flag (or its variable) and the file.
func TestTLSFlagsRefuseBadFiles(t *testing.T) {
	ca := testkit.NewCA(t, "CA")
	certFile, keyFile := ca.IssueCert(t, "server").Files(t)
	_, otherKey := ca.IssueCert(t, "other").Files(t)
	dir := t.TempDir()
	missing, empty := filepath.Join(dir, "missing.pem"), filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	proxy := []string{"proxy", "--http", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1", "--limit", "1/s"}
	serve := []string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"}
	for _, tc := range []struct {
		name string
		args []string
		env  string // NAME=value
		want []string
	}{
		{"certificate without key", append(serve, "--tls-cert", certFile), "", []string{"--tls-cert " + certFile + " needs --tls-key"}},
		{"key without certificate", append(serve, "--tls-key", keyFile), "", []string{"--tls-key " + keyFile + " needs --tls-cert"}},
		{"client CA without certificate", append(serve, "--tls-client-ca", ca.File(t)), "", []string{"--tls-client-ca needs --tls-cert"}},
		{"missing certificate", append(serve, "--tls-cert", missing, "--tls-key", keyFile), "", []string{"--tls-cert: TLS certificate " + missing, "no such file"}},
		{"key of another certificate", append(serve, "--tls-cert", certFile, "--tls-key", otherKey), "", []string{"--tls-key: TLS key " + otherKey, "does not match"}},
		{"client CA without certificates, from the environment", append(serve, "--tls-cert", certFile, "--tls-key", keyFile),
			"FLOODGATE_TLS_CLIENT_CA=" + empty, []string{"--tls-client-ca: TLS client CA " + empty + ": no PEM certificate"}},
		{"proxy: missing key", append(proxy, "--tls-cert", certFile, "--tls-key", missing), "", []string{"--tls-key: TLS key " + missing}},
		{"admin address", append(serve, "--admin", "256.0.0.1:80"), "", []string{"--admin 256.0.0.1:80"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if name, value, ok := strings.Cut(tc.env, "="); ok {
				t.Setenv(name, value)
			}
			var out strings.Builder
			code := Main(context.Background(), tc.args, &out, &out)
			for _, want := range tc.want {
				if code != 1 || !strings.Contains(out.String(), want) {
					t.Fatalf("exit %d, %q; want 1 and an error with %q", code, out.String(), want)
				}
			}
		})
	}
}

var adminListening = regexp.MustCompile(`http=(\S+) grpc=(\S+) admin=(\S+)`)

// tlsGet is a GET over a new TLS connection that trusts ca and presents
// cert (nil: none); it returns the status and the common name of the
// certificate served.
func tlsGet(t *testing.T, url, token string, ca *testkit.CA, cert *testkit.Cert) (int, string, error) {
	t.Helper()
	conf := &tls.Config{RootCAs: ca.Pool()}
	if cert != nil {
		conf.Certificates = []tls.Certificate{cert.TLS(t)}
	}
	tr := &http.Transport{TLSClientConfig: conf}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: timing.Patience}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.TLS.PeerCertificates[0].Subject.CommonName, nil
}

// serve with --tls-cert, --tls-key, --tls-client-ca and --admin: HTTP and
// gRPC serve clients with a certificate of the CA only; the admin
// listener serves pprof behind the token to clients without one; a
// certificate rewritten in place is served without a restart.
func TestServeOverMTLSWithAdminListener(t *testing.T) {
	ca := testkit.NewCA(t, "CA")
	certFile, keyFile := ca.IssueCert(t, "first").Files(t)
	m, _ := startCommand(t, adminListening, []string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--admin", "127.0.0.1:0",
		"--admin-token", "s3cret", "--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", ca.File(t)})
	httpURL, grpcAddr, adminURL := "https://"+m[1], m[2], "https://"+m[3]
	client := ca.IssueCert(t, "envoy")

	for _, tc := range []struct {
		url, token string
		cert       *testkit.Cert
		status     int // 0: no answer
	}{
		{httpURL + "/healthz", "", client, 200},
		{httpURL + "/healthz", "", nil, 0},
		{httpURL + "/debug/pprof/", "s3cret", client, 404},
		{adminURL + "/debug/pprof/", "s3cret", nil, 200},
		{adminURL + "/debug/pprof/", "", nil, 401},
		{adminURL + "/metrics", "", nil, 200},
		{adminURL + "/readyz", "", nil, 200},
	} {
		status, _, err := tlsGet(t, tc.url, tc.token, ca, tc.cert)
		if status != tc.status {
			t.Errorf("GET %s (client certificate %v, token %q): %d %v, want %d", tc.url, tc.cert != nil, tc.token, status, err, tc.status)
		}
	}

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(
		&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLS(t)}})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("gRPC health over mTLS: %v", err)
	}

	ca.IssueCert(t, "second").Write(t, certFile, keyFile)
	later := time.Now().Add(time.Hour) // a modification time the first files cannot share
	for _, p := range []string{certFile, keyFile} {
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if _, cn, err := tlsGet(t, httpURL+"/healthz", "", ca, client); err != nil || cn != "second" {
		t.Fatalf("after the rotation: certificate %q (%v), want %q", cn, err, "second")
	}
}

// The proxy serves HTTPS with --tls-cert and --tls-key.
func TestProxyOverTLS(t *testing.T) {
	ca := testkit.NewCA(t, "CA")
	certFile, keyFile := ca.IssueCert(t, "proxy").Files(t)
	addr := startProxy(t, "--limit", "100/s", "--tls-cert", certFile, "--tls-key", keyFile)
	if status, cn, err := tlsGet(t, "https://"+addr+"/", "", ca, nil); err != nil || status != 200 || cn != "proxy" {
		t.Fatalf("GET over TLS: %d, certificate %q, %v; want 200 from %q", status, cn, err, "proxy")
	}
}
