package assemble

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// openRedis opens the stores on a Redis reached as redis and auth say.
func openRedis(t *testing.T, redis []string, auth RedisAuth) (*Stores, error) {
	t.Helper()
	st, err := Open(context.Background(), Config{Redis: redis, RedisAuth: auth, RedisPrefix: "auth-test:", StoreTimeout: 2 * time.Second,
		FailureMode: failover.FailClosed, Fleet: FleetConfig{Strategy: policy.StrategyExact, NodeName: "n", Nodes: 1}}, nil, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Cleanup(st.Close)
	}
	return st, err
}

// decideOnce asks the store for one decision on a key of the test's own,
// which fails closed unless Redis answered.
func decideOnce(t *testing.T, st *Stores) {
	t.Helper()
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: time.Minute}
	d, err := st.Default().AllowN(context.Background(), t.Name(), limit, 1)
	if err != nil || !d.Allowed || d.Remaining != 9 {
		t.Fatalf("decision = %+v, %v; want allowed with 9 remaining", d, err)
	}
}

// A Redis with requirepass is reached with the password from a URL or
// the flag; a wrong or missing password stops the start with Redis's
// reason, not a later stream of failed decisions.
func TestRedisWithAPassword(t *testing.T) {
	srv := testkit.StartServer(t, testkit.WithPassword("s3cret"))
	addr := srv.Addr()
	secret := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		redis   string
		auth    RedisAuth
		wantErr string
	}{
		{name: "URL", redis: "redis://:s3cret@" + addr},
		{name: "URL with the default user", redis: "redis://default:s3cret@" + addr + "/1"},
		{name: "flag", redis: addr, auth: RedisAuth{Password: "s3cret"}},
		{name: "password file", redis: addr, auth: RedisAuth{PasswordFile: secret}},
		{name: "password file with a URL user", redis: "redis://default@" + addr, auth: RedisAuth{PasswordFile: secret}},
		{name: "wrong password", redis: "redis://:wrong@" + addr, wantErr: "WRONGPASS"},
		{name: "no password", redis: addr, wantErr: "NOAUTH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := openRedis(t, []string{tt.redis}, tt.auth)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--redis") {
					t.Fatalf("Open = %v, want a --redis error with %s", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "wrong") {
					t.Fatalf("error %q shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			decideOnce(t, st)
		})
	}
}

// A Redis on a Unix socket is reached with a unix:// URL, its password
// and database in it; a path that is no socket stops the start (one with
// nothing yet is a Redis not up yet: see TestStartWithRedisDown).
func TestRedisOverAUnixSocket(t *testing.T) {
	srv := testkit.StartServer(t, testkit.WithUnixSocket(), testkit.WithPassword("s3cret"))
	notSocket := filepath.Join(t.TempDir(), "redis.sock")
	if err := os.WriteFile(notSocket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		redis   string
		wantErr string
	}{
		{name: "unix URL", redis: "unix://:s3cret@" + srv.UnixSocket() + "?db=2"},
		{name: "redis+unix URL", redis: "redis+unix://default:s3cret@" + srv.UnixSocket()},
		{name: "wrong password", redis: "unix://:wrong@" + srv.UnixSocket(), wantErr: "WRONGPASS"},
		{name: "not a socket", redis: "unix://" + notSocket, wantErr: "not a Unix socket (it is a regular file)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := openRedis(t, []string{tt.redis}, RedisAuth{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--redis") {
					t.Fatalf("Open = %v, want a --redis error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			decideOnce(t, st)
		})
	}
	if keyspace := srv.Do(t, "INFO", "keyspace"); !strings.Contains(keyspace, "db2:keys=1") || !strings.Contains(keyspace, "db0:keys=1") {
		t.Fatalf("INFO keyspace = %s, want a key in database 2 (?db=2) and one in 0", keyspace)
	}
}

// Over TLS: a server whose certificate a throwaway CA signs is reached
// with --redis-tls-ca; a certificate for another name only with
// --redis-tls-skip-hostname-verification; a CA it does not trust never.
func TestRedisOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir, "ca")
	ca.issue(t, dir, "ip", "127.0.0.1")
	ca.issue(t, dir, "other", "redis.example")
	other := newCA(t, dir, "other-ca")
	serve := func(cert string) string {
		port := freeTCPPort(t)
		testkit.StartServer(t, testkit.WithArgs("--tls-port", strconv.Itoa(port),
			"--tls-cert-file", filepath.Join(dir, cert+".crt"), "--tls-key-file", filepath.Join(dir, cert+".key"),
			"--tls-ca-cert-file", ca.certPath, "--tls-auth-clients", "no"))
		return "127.0.0.1:" + strconv.Itoa(port)
	}
	requireTLS(t)
	byIP, byOtherName := serve("ip"), serve("other")
	tests := []struct {
		name    string
		redis   string
		tls     RedisTLS
		wantErr string
	}{
		{name: "rediss URL and CA", redis: "rediss://" + byIP, tls: RedisTLS{CA: ca.certPath}},
		{name: "--redis-tls", redis: byIP, tls: RedisTLS{Enabled: true, CA: ca.certPath}},
		{name: "name not checked", redis: "rediss://" + byOtherName, tls: RedisTLS{CA: ca.certPath, SkipHostnameVerification: true}},
		{name: "name checked", redis: "rediss://" + byOtherName, tls: RedisTLS{CA: ca.certPath}, wantErr: "certificate"},
		{name: "untrusted CA", redis: "rediss://" + byIP, tls: RedisTLS{CA: other.certPath}, wantErr: "certificate"},
		{name: "untrusted CA, name not checked", redis: "rediss://" + byIP,
			tls: RedisTLS{CA: other.certPath, SkipHostnameVerification: true}, wantErr: "certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := openRedis(t, []string{tt.redis}, RedisAuth{TLS: tt.tls})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Open = %v, want an error about the %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			decideOnce(t, st)
		})
	}
}

// With --redis-sentinel-master, --redis lists Sentinels: the store asks a
// real redis-sentinel for the master, which has a password of its own.
func TestRedisThroughSentinel(t *testing.T) {
	master := testkit.StartServer(t, testkit.WithPassword("m4ster"))
	sentinel := testkit.StartSentinel(t, "mymaster", master.Addr(), "m4ster").Addr
	st, err := openRedis(t, []string{sentinel}, RedisAuth{Password: "m4ster", SentinelMaster: "mymaster"})
	if err != nil {
		t.Fatal(err)
	}
	decideOnce(t, st)
	if keys := master.Do(t, "DBSIZE"); keys != "1" {
		t.Fatalf("the master holds %s keys, want the decision's 1", keys)
	}
	_, err = openRedis(t, []string{sentinel}, RedisAuth{Password: "m4ster", SentinelMaster: "nosuchmaster"})
	if err == nil {
		t.Fatal("Open with a master set the Sentinel does not watch succeeded")
	}
}

// requireTLS skips unless redis-server was built with TLS.
func requireTLS(t *testing.T) {
	t.Helper()
	testkit.RequireBinaries(t)
	out, _ := exec.Command("redis-server", "--tls-port", "0", "--port", "0", "--bogus-option-for-probe").CombinedOutput()
	if strings.Contains(string(out), "tls-port") {
		t.Skip("this redis-server was built without TLS (BUILD_TLS=yes); Debian's redis-server has it")
	}
}

// freeTCPPort is a port on 127.0.0.1 that was free a moment ago.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// testCA is a throwaway certificate authority.
type testCA struct {
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	certPath string
}

func newCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, certPath: filepath.Join(dir, name+".crt")}
	writePEM(t, ca.certPath, "CERTIFICATE", der)
	return ca
}

// issue writes name.crt and name.key: a server certificate for host (an
// IP address or a DNS name) signed by the CA.
func (ca *testCA) issue(t *testing.T, dir, name, host string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".crt"), "CERTIFICATE", der)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".key"), "EC PRIVATE KEY", kder)
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
