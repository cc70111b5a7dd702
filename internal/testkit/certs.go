package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// certLifetime is how long a test certificate is valid either side of
// its issue: long enough for any test, short enough that one leaked from
// a test's directory is worthless.
const certLifetime = 24 * time.Hour

// CA is a certificate authority made for one test: it signs the server
// and client certificates of TLS and mTLS tests (Floodgate's listeners,
// redis-server's --tls-port), so that nothing depends on files kept in
// the repository, which would expire.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  []byte // the certificate, PEM-encoded
}

// Cert is a certificate and its private key, issued by a CA.
type Cert struct {
	Leaf    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA makes a self-signed certificate authority named name. Two CAs
// made with the same name are still distinct: a certificate one issues
// does not verify against the other.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := certTemplate(tb, name)
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("testkit: create CA %q: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("testkit: parse CA %q: %v", name, err)
	}
	return &CA{Cert: cert, key: key, PEM: pemBlock("CERTIFICATE", der)}
}

// IssueCert signs a certificate for commonName, good for both server and
// client authentication. hosts are its subject alternative names, each an
// IP address or a DNS name; with none it names localhost, 127.0.0.1 and
// ::1, where tests listen.
func (ca *CA) IssueCert(tb testing.TB, commonName string, hosts ...string) *Cert {
	tb.Helper()
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	key := newKey(tb)
	tmpl := certTemplate(tb, commonName)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatalf("testkit: issue certificate %q: %v", commonName, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("testkit: parse certificate %q: %v", commonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("testkit: marshal key of %q: %v", commonName, err)
	}
	return &Cert{Leaf: leaf, CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("PRIVATE KEY", keyDER)}
}

// Pool is a certificate pool holding only the CA: a client's RootCAs or
// a server's ClientCAs.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// File writes the CA's certificate to a new file in a temporary directory
// of the test and returns its path (for --tls-client-ca, --tls-ca-cert-file).
func (ca *CA) File(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "ca.pem")
	writeFile(tb, path, ca.PEM)
	return path
}

// TLS is the certificate as crypto/tls serves or presents it.
func (c *Cert) TLS(tb testing.TB) tls.Certificate {
	tb.Helper()
	pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		tb.Fatalf("testkit: key pair of %q: %v", c.Leaf.Subject.CommonName, err)
	}
	return pair
}

// Files writes the certificate and its key to new files in a temporary
// directory of the test and returns their paths.
func (c *Cert) Files(tb testing.TB) (certFile, keyFile string) {
	tb.Helper()
	dir := tb.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	c.Write(tb, certFile, keyFile)
	return certFile, keyFile
}

// Write writes the certificate and its key to the given paths, replacing
// what they held: how a test rotates a certificate under a running server.
// Each file is written beside its path and renamed over it, so a reader
// never sees half of one.
func (c *Cert) Write(tb testing.TB, certFile, keyFile string) {
	tb.Helper()
	writeFile(tb, certFile, c.CertPEM)
	writeFile(tb, keyFile, c.KeyPEM)
}

func writeFile(tb testing.TB, path string, data []byte) {
	tb.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		tb.Fatalf("testkit: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatalf("testkit: %v", err)
	}
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("testkit: generate key: %v", err)
	}
	return key
}

// certTemplate is what every test certificate shares: a random serial
// (two certificates with the same issuer and serial confuse verifiers)
// and a validity around now.
func certTemplate(tb testing.TB, commonName string) *x509.Certificate {
	tb.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		tb.Fatalf("testkit: serial: %v", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"Floodgate tests"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certLifetime),
	}
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
