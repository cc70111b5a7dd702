package redisstore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/redisstore"
)

// A Redis that listens on a Unix socket is reached through it: the
// decisions are counted there, by a client Redis lists on its socket.
func TestUnixSocket(t *testing.T) {
	srv := testkit.StartServer(t, testkit.WithUnixSocket())
	l, err := redisstore.New(redisstore.Config{Addrs: []string{srv.UnixSocket()}, Network: redisstore.NetworkUnix,
		KeyPrefix: "unix:", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 2, Period: time.Minute}
	for i, want := range []bool{true, true, false} {
		d, err := l.AllowN(context.Background(), "k", limit, 1)
		if err != nil || d.Allowed != want {
			t.Fatalf("decision %d = %+v, %v; want allowed %v", i, d, err, want)
		}
	}
	if got := srv.Do(t, "EXISTS", "unix:k"); got != "1" {
		t.Fatalf("EXISTS unix:k = %s, want the key in the Redis behind the socket", got)
	}
	if clients := srv.Do(t, "CLIENT", "LIST"); !strings.Contains(clients, "addr="+srv.UnixSocket()) {
		t.Fatalf("no client on the socket %s in CLIENT LIST:\n%s", srv.UnixSocket(), clients)
	}
}

// A Unix socket that cannot work is refused at New with its reason: a
// path that names no socket (ErrNotSocket), a missing one (the store is
// unavailable: Redis may not be up yet), or settings that need TCP.
func TestUnixSocketRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "redis.sock")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	unix := func(addrs ...string) redisstore.Config {
		return redisstore.Config{Addrs: addrs, Network: redisstore.NetworkUnix, DialTimeout: time.Second}
	}
	tests := []struct {
		name    string
		cfg     redisstore.Config
		wantIs  error
		wantErr string
	}{
		{name: "a regular file", cfg: unix(file), wantIs: redisstore.ErrNotSocket, wantErr: "regular file"},
		{name: "a directory", cfg: unix(dir), wantIs: redisstore.ErrNotSocket, wantErr: "directory"},
		{name: "nothing there", cfg: unix(filepath.Join(dir, "none.sock")), wantIs: floodgate.ErrStoreUnavailable, wantErr: "no such file"},
		{name: "two paths", cfg: unix("/a.sock", "/b.sock"), wantErr: "one path, not 2"},
		{name: "Sentinels", cfg: func() redisstore.Config {
			c := unix("/a.sock")
			c.Sentinel.MasterSet = "mymaster"
			return c
		}(), wantErr: "Sentinels are reached over TCP"},
		{name: "TLS", cfg: func() redisstore.Config {
			c := unix("/a.sock")
			c.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
			return c
		}(), wantErr: "no TLS over a Unix socket"},
		{name: "unknown network", cfg: redisstore.Config{Addrs: []string{"a:1"}, Network: "udp"}, wantErr: `network "udp": want tcp or unix`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := redisstore.New(tt.cfg)
			if err == nil {
				l.Close()
				t.Fatalf("New(%+v) succeeded, want an error with %q", tt.cfg, tt.wantErr)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("New = %v, want it to wrap %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New = %v, want %q in it", err, tt.wantErr)
			}
		})
	}
}
