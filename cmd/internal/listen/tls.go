package listen

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ErrNoCertificate is wrapped by a FileError for a PEM file that holds no
// certificate where one is needed.
var ErrNoCertificate = errors.New("no PEM certificate in the file")

// FileError is a TLS file that cannot serve: missing, unreadable, not
// PEM, or a key that does not match its certificate. Path names the file,
// What its role ("certificate", "key", "client CA").
type FileError struct {
	What string
	Path string
	Err  error
}

func (e *FileError) Error() string { return fmt.Sprintf("TLS %s %s: %v", e.What, e.Path, e.Err) }
func (e *FileError) Unwrap() error { return e.Err }

// TLSFiles name the PEM files of the listeners' TLS: the certificate
// (with its chain) and its key, and optionally the certificate
// authorities whose client certificates are required (mTLS).
type TLSFiles struct {
	Cert, Key string
	ClientCA  string // "": no client certificate asked for
}

// TLS serves the certificate of TLSFiles and re-reads the files when one
// of them changes, so that a rotated certificate (cert-manager, a mounted
// Kubernetes Secret) is served without a restart. Each handshake compares
// the files' modification times and sizes with those last loaded; a
// change that does not load (a key written before its certificate) is
// logged once and the previous certificate served until the files load.
// It is safe for concurrent handshakes.
type TLS struct {
	files TLSFiles
	log   *slog.Logger

	mu     sync.Mutex
	cur    *loadedTLS
	stamps stamps // of the files cur was loaded from
	failed stamps // of the files that last failed to load, not retried
}

// loadedTLS is what one reading of the files gave.
type loadedTLS struct {
	cert      tls.Certificate
	clientCAs *x509.CertPool // nil: no client certificates asked for
}

// stamp is what tells a changed file: its modification time and size.
type stamp struct {
	mod  time.Time
	size int64
}

type stamps [3]stamp // cert, key, client CA

// LoadTLS reads files now, so that a bad file fails the start and not the
// first handshake; log (nil: discard) receives the reloads.
func LoadTLS(files TLSFiles, log *slog.Logger) (*TLS, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if files.Cert == "" || files.Key == "" {
		return nil, errors.New("TLS needs both a certificate and its key")
	}
	t := &TLS{files: files, log: log}
	t.stamps = t.stat()
	cur, err := files.load()
	if err != nil {
		return nil, err
	}
	t.cur = cur
	return t, nil
}

// Files are the files t serves.
func (t *TLS) Files() TLSFiles { return t.files }

// httpProtos and grpcProtos are what ALPN offers on each listener.
var (
	httpProtos = []string{"h2", "http/1.1"}
	grpcProtos = []string{"h2"}
)

// config is a listener's server configuration: TLS 1.2 at least, the
// current certificate at each handshake and, when clientAuth and a client
// CA is configured, a client certificate required and verified.
func (t *TLS) config(protos []string, clientAuth bool) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: protos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cur := t.current()
			c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: protos, Certificates: []tls.Certificate{cur.cert}}
			if clientAuth && cur.clientCAs != nil {
				c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, cur.clientCAs
			}
			return c, nil
		},
	}
}

// current is the certificate to serve, reloaded first if the files changed.
func (t *TLS) current() *loadedTLS {
	now := t.stat()
	t.mu.Lock()
	defer t.mu.Unlock()
	if now == t.stamps || now == t.failed {
		return t.cur
	}
	next, err := t.files.load()
	if err != nil {
		t.failed = now
		t.log.Warn("listen: the TLS files changed but do not load; serving the previous certificate", "error", err)
		return t.cur
	}
	t.cur, t.stamps, t.failed = next, now, stamps{}
	t.log.Info("listen: TLS certificate reloaded", "cert", t.files.Cert,
		"subject", next.cert.Leaf.Subject.String(), "not_after", next.cert.Leaf.NotAfter)
	return t.cur
}

// stat stamps the files; a file that cannot be read stamps zero, which
// differs from any loaded file, so its return is noticed.
func (t *TLS) stat() stamps {
	var s stamps
	for i, path := range []string{t.files.Cert, t.files.Key, t.files.ClientCA} {
		if path == "" {
			continue
		}
		if fi, err := os.Stat(path); err == nil {
			s[i] = stamp{fi.ModTime(), fi.Size()}
		}
	}
	return s
}

// load reads the files, naming the one at fault in its error.
func (f TLSFiles) load() (*loadedTLS, error) {
	certPEM, err := readCerts("certificate", f.Cert)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return nil, &FileError{"key", f.Key, err}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, &FileError{"key", f.Key, fmt.Errorf("%w (certificate %s)", err, f.Cert)}
	}
	l := &loadedTLS{cert: cert}
	if f.ClientCA == "" {
		return l, nil
	}
	caPEM, err := readCerts("client CA", f.ClientCA)
	if err != nil {
		return nil, err
	}
	l.clientCAs = x509.NewCertPool()
	l.clientCAs.AppendCertsFromPEM(caPEM)
	return l, nil
}

// readCerts reads a PEM file whose certificates must all parse, and of
// which there must be one at least.
func readCerts(what, path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &FileError{what, path, err}
	}
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, &FileError{what, path, err}
		}
		n++
	}
	if n == 0 {
		return nil, &FileError{what, path, ErrNoCertificate}
	}
	return data, nil
}
