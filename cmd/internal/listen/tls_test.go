package listen_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate-io/floodgate/cmd/internal/listen"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// TestLoadTLSRefusesBadFiles: a file that cannot serve fails LoadTLS,
// at start, with an error naming that file and its role.
func TestLoadTLSRefusesBadFiles(t *testing.T) {
	ca := testkit.NewCA(t, "CA")
	certFile, keyFile := ca.IssueCert(t, "server").Files(t)
	_, otherKey := ca.IssueCert(t, "other").Files(t)
	caFile := ca.File(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		files    listen.TLSFiles
		what     string // the role the error names
		path     string // the file the error names
		sentinel error  // errors.Is, when not nil
	}{
		{"missing certificate", listen.TLSFiles{Cert: missing, Key: keyFile}, "certificate", missing, fs.ErrNotExist},
		{"missing key", listen.TLSFiles{Cert: certFile, Key: missing}, "key", missing, fs.ErrNotExist},
		{"certificate not PEM", listen.TLSFiles{Cert: notPEM, Key: keyFile}, "certificate", notPEM, listen.ErrNoCertificate},
		{"key in the certificate's place", listen.TLSFiles{Cert: keyFile, Key: keyFile}, "certificate", keyFile, listen.ErrNoCertificate},
		{"key not PEM", listen.TLSFiles{Cert: certFile, Key: notPEM}, "key", notPEM, nil},
		{"key of another certificate", listen.TLSFiles{Cert: certFile, Key: otherKey}, "key", otherKey, nil},
		{"client CA without certificates", listen.TLSFiles{Cert: certFile, Key: keyFile, ClientCA: notPEM}, "client CA", notPEM, listen.ErrNoCertificate},
		{"missing client CA", listen.TLSFiles{Cert: certFile, Key: keyFile, ClientCA: missing}, "client CA", missing, fs.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := listen.LoadTLS(tc.files, nil)
			var fe *listen.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("LoadTLS: %v, want a *FileError", err)
			}
			if fe.What != tc.what || fe.Path != tc.path {
				t.Fatalf("error names the %s %s, want the %s %s: %v", fe.What, fe.Path, tc.what, tc.path, err)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Fatalf("LoadTLS: %v, want errors.Is %v", err, tc.sentinel)
			}
		})
	}
	if _, err := listen.LoadTLS(listen.TLSFiles{Cert: certFile, Key: keyFile, ClientCA: caFile}, nil); err != nil {
		t.Fatalf("LoadTLS of good files: %v", err)
	}
	if _, err := listen.LoadTLS(listen.TLSFiles{Cert: certFile}, nil); err == nil {
		t.Fatalf("LoadTLS of a certificate without its key: nil error")
	}
}

// tlsListeners serves HTTP, gRPC health and an admin HTTP listener over
// the TLS of files until the test ends; it returns their addresses.
func tlsListeners(t *testing.T, files listen.TLSFiles) (httpAddr, grpcAddr, adminAddr string) {
	t.Helper()
	tl, err := listen.LoadTLS(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := listen.Defaults()
	opts.TLS = tl
	d := listen.NewDrain(opts, nil)
	g := grpc.NewServer(opts.GRPCOptions()...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	httpLn, grpcLn, adminLn := servicetest.Loopback(t), servicetest.Loopback(t), servicetest.Loopback(t)
	servicetest.Serve(t, func(ctx context.Context) error {
		return d.Serve(ctx, listen.HTTP(d.HTTPServer(echo), httpLn), listen.GRPC(g, grpcLn),
			listen.HTTP(d.AdminHTTPServer(echo), adminLn))
	})
	return httpLn.Addr().String(), grpcLn.Addr().String(), adminLn.Addr().String()
}

// httpsGet is a GET over a new TLS connection; it returns the common name
// of the certificate served.
func httpsGet(t *testing.T, addr string, conf *tls.Config) (string, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status)
	}
	return resp.TLS.PeerCertificates[0].Subject.CommonName, nil
}

// grpcHealth asks gRPC health over TLS.
func grpcHealth(t *testing.T, addr string, conf *tls.Config) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(conf)))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound against a hang, not a measure
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// TestTLSListeners: with a client CA, HTTP and gRPC answer only clients
// whose certificate that CA signed, over TLS 1.2 at least; the admin
// listener answers any TLS client (its token guards it).
func TestTLSListeners(t *testing.T) {
	ca, other := testkit.NewCA(t, "CA"), testkit.NewCA(t, "other CA")
	certFile, keyFile := ca.IssueCert(t, "server").Files(t)
	httpAddr, grpcAddr, adminAddr := tlsListeners(t, listen.TLSFiles{Cert: certFile, Key: keyFile, ClientCA: ca.File(t)})

	client := func(c *testkit.Cert, maxVersion uint16) *tls.Config {
		conf := &tls.Config{RootCAs: ca.Pool(), MaxVersion: maxVersion}
		if c != nil {
			conf.Certificates = []tls.Certificate{c.TLS(t)}
		}
		return conf
	}
	good, foreign := ca.IssueCert(t, "client"), other.IssueCert(t, "client")
	cases := []struct {
		name    string
		conf    *tls.Config
		ok      bool // on HTTP and gRPC
		adminOK bool
	}{
		{"client certificate from the CA", client(good, 0), true, true},
		{"client certificate from the CA, TLS 1.2", client(good, tls.VersionTLS12), true, true},
		{"no client certificate", client(nil, 0), false, true},
		{"client certificate from another CA", client(foreign, 0), false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := httpsGet(t, httpAddr, tc.conf); (err == nil) != tc.ok {
				t.Errorf("HTTPS: %v, want success %v", err, tc.ok)
			}
			if _, err := httpsGet(t, adminAddr, tc.conf); (err == nil) != tc.adminOK {
				t.Errorf("admin HTTPS: %v, want success %v", err, tc.adminOK)
			}
			if err := grpcHealth(t, grpcAddr, tc.conf); (err == nil) != tc.ok {
				t.Errorf("gRPC: %v, want success %v", err, tc.ok)
			}
		})
	}
}

// TestTLSRefusesBelow12: a client that offers at most TLS 1.1 gets no
// handshake, on any listener; TLS 1.2 does.
func TestTLSRefusesBelow12(t *testing.T) {
	ca := testkit.NewCA(t, "CA")
	certFile, keyFile := ca.IssueCert(t, "server").Files(t)
	httpAddr, grpcAddr, adminAddr := tlsListeners(t, listen.TLSFiles{Cert: certFile, Key: keyFile})
	for _, addr := range []string{httpAddr, grpcAddr, adminAddr} {
		for _, tc := range []struct {
			version uint16
			ok      bool
		}{{tls.VersionTLS11, false}, {tls.VersionTLS12, true}} {
			conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tc.version})
			if err == nil {
				conn.Close()
			}
			if (err == nil) != tc.ok {
				t.Errorf("%s, TLS at most %s: %v, want success %v", addr, tls.VersionName(tc.version), err, tc.ok)
			}
		}
	}
}

// TestTLSServesARotatedCertificate: a certificate rewritten in place is
// served from the next handshake on, without a restart; a rotation
// half-done (a certificate without its new key) keeps the previous
// certificate served until the key arrives.
func TestTLSServesARotatedCertificate(t *testing.T) {
	ca := testkit.NewCA(t, "CA")
	first := ca.IssueCert(t, "first")
	certFile, keyFile := first.Files(t)
	httpAddr, grpcAddr, _ := tlsListeners(t, listen.TLSFiles{Cert: certFile, Key: keyFile})
	conf := &tls.Config{RootCAs: ca.Pool()}

	// Files rewritten in quick succession can share a modification time:
	// each step moves it on by an hour, as a later rotation would.
	mod := time.Now()
	touch := func(paths ...string) {
		mod = mod.Add(time.Hour)
		for _, p := range paths {
			if err := os.Chtimes(p, mod, mod); err != nil {
				t.Fatal(err)
			}
		}
	}
	served := func(want string) {
		t.Helper()
		if cn, err := httpsGet(t, httpAddr, conf); err != nil || cn != want {
			t.Fatalf("HTTPS served %q (%v), want %q", cn, err, want)
		}
		if err := grpcHealth(t, grpcAddr, conf); err != nil {
			t.Fatalf("gRPC after rotation to %q: %v", want, err)
		}
	}
	served("first")

	second := ca.IssueCert(t, "second")
	second.Write(t, certFile, filepath.Join(t.TempDir(), "elsewhere.pem")) // the certificate only
	touch(certFile)
	served("first") // its key does not match: the previous pair stays

	second.Write(t, certFile, keyFile)
	touch(certFile, keyFile)
	served("second")
}

// A plain-text client on a TLS listener is not served: net/http answers
// it 400 before any handler runs.
func TestTLSListenerRefusesPlainText(t *testing.T) {
	ca := testkit.NewCA(t, "CA")
	certFile, keyFile := ca.IssueCert(t, "server").Files(t)
	httpAddr, _, _ := tlsListeners(t, listen.TLSFiles{Cert: certFile, Key: keyFile})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + httpAddr + "/")
	if err != nil {
		t.Fatalf("plain HTTP on the TLS listener: %v, want net/http's 400", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain HTTP on the TLS listener: %s, want 400", resp.Status)
	}
}
