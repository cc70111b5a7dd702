package testkit

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
)

// TestCertsHandshake holds the certificates to what TLS tests need of
// them: a server certificate verifies against its own CA for the default
// hosts, a client certificate passes a server that requires one, and a
// certificate from another CA verifies against neither.
func TestCertsHandshake(t *testing.T) {
	ca, other := NewCA(t, "test CA"), NewCA(t, "test CA")
	server := ca.IssueCert(t, "server")
	cases := []struct {
		name       string
		client     *Cert
		serverName string
		ok         bool
	}{
		{"client cert from the CA, by IP", ca.IssueCert(t, "client"), "127.0.0.1", true},
		{"client cert from the CA, by name", ca.IssueCert(t, "client"), "localhost", true},
		{"client cert from another CA", other.IssueCert(t, "client"), "127.0.0.1", false},
		{"no client cert", nil, "127.0.0.1", false},
		{"name not in the certificate", ca.IssueCert(t, "client"), "example.com", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			serverConf := &tls.Config{
				Certificates: []tls.Certificate{server.TLS(t)},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    ca.Pool(),
			}
			clientConf := &tls.Config{RootCAs: ca.Pool(), ServerName: tc.serverName}
			if tc.client != nil {
				clientConf.Certificates = []tls.Certificate{tc.client.TLS(t)}
			}
			err := handshake(t, serverConf, clientConf)
			if (err == nil) != tc.ok {
				t.Fatalf("handshake: %v, want success %v", err, tc.ok)
			}
		})
	}
}

// TestCertFiles checks that the written files load as crypto/tls and
// x509 read them from disk.
func TestCertFiles(t *testing.T) {
	ca := NewCA(t, "test CA")
	certFile, keyFile := ca.IssueCert(t, "server").Files(t)
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Fatalf("LoadX509KeyPair: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.PEM) {
		t.Fatalf("CA PEM holds no certificate")
	}
}

// handshake runs one TLS handshake over a pipe and returns the server's
// error, or else the client's.
func handshake(t *testing.T, serverConf, clientConf *tls.Config) error {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	serverErr := make(chan error, 1)
	go func() {
		s := tls.Server(a, serverConf)
		err := s.Handshake()
		if err == nil {
			// TLS 1.3 reports a refused client certificate on the
			// client's first read, not during its handshake.
			_, err = s.Write([]byte("x"))
		}
		a.Close()
		serverErr <- err
	}()
	c := tls.Client(b, clientConf)
	clientErr := c.Handshake()
	if clientErr == nil {
		_, clientErr = c.Read(make([]byte, 1))
	}
	b.Close()
	if err := <-serverErr; err != nil {
		return err
	}
	return clientErr
}
