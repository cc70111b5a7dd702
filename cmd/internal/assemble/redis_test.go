package assemble

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/redisstore"
)

// redisConfig reads --redis as host:port or a redis:// / rediss:// URL,
// and merges what a URL says with the flags; a conflict, a malformed
// address or TLS files without TLS is an error that names the setting
// and never shows the password.
func TestRedisConfigReadsAddressesURLsAndFlags(t *testing.T) {
	tests := []struct {
		name    string
		redis   []string
		auth    RedisAuth
		want    redisstore.Config // Addrs, Username, Password, DB, Sentinel; TLS checked as on/off
		wantTLS bool
		wantErr string
	}{
		{name: "host:port", redis: []string{"10.0.0.1:6379"},
			want: redisstore.Config{Addrs: []string{"10.0.0.1:6379"}}},
		{name: "password in the URL (was: too many colons)", redis: []string{"redis://:secret@10.0.0.1:6379"},
			want: redisstore.Config{Addrs: []string{"10.0.0.1:6379"}, Password: "secret"}},
		{name: "user, password and database", redis: []string{"redis://app:s3cr%40t@redis.internal:6380/2"},
			want: redisstore.Config{Addrs: []string{"redis.internal:6380"}, Username: "app", Password: "s3cr@t", DB: 2}},
		{name: "rediss is TLS", redis: []string{"rediss://redis.internal:6380"},
			want: redisstore.Config{Addrs: []string{"redis.internal:6380"}}, wantTLS: true},
		{name: "cluster seeds as URLs that agree", redis: []string{"redis://:pw@a:1", "redis://:pw@b:2"},
			want: redisstore.Config{Addrs: []string{"a:1", "b:2"}, Password: "pw"}},
		{name: "flags", redis: []string{"a:1"}, auth: RedisAuth{Username: "u", Password: "p", TLS: RedisTLS{Enabled: true}},
			want: redisstore.Config{Addrs: []string{"a:1"}, Username: "u", Password: "p"}, wantTLS: true},
		{name: "flag and URL that agree", redis: []string{"redis://:p@a:1"}, auth: RedisAuth{Password: "p"},
			want: redisstore.Config{Addrs: []string{"a:1"}, Password: "p"}},
		{name: "sentinel", redis: []string{"s1:26379", "s2:26379"},
			auth: RedisAuth{Password: "m", SentinelMaster: "mymaster", SentinelPassword: "s"},
			want: redisstore.Config{Addrs: []string{"s1:26379", "s2:26379"}, Password: "m",
				Sentinel: redisstore.Sentinel{MasterSet: "mymaster", Password: "s"}}},
		{name: "--redis-sentinel master@addresses", auth: RedisAuth{Sentinel: "mymaster@s1:26379,s2:26379", SentinelPassword: "s"},
			want: redisstore.Config{Addrs: []string{"s1:26379", "s2:26379"},
				Sentinel: redisstore.Sentinel{MasterSet: "mymaster", Password: "s"}}},
		{name: "TLS server name", redis: []string{"rediss://10.0.0.1:6380"}, auth: RedisAuth{TLS: RedisTLS{ServerName: "redis.internal"}},
			want: redisstore.Config{Addrs: []string{"10.0.0.1:6380"}}, wantTLS: true},

		{name: "flag and URL that differ", redis: []string{"redis://:secret@a:1"}, auth: RedisAuth{Password: "other"},
			wantErr: "the URL's password differs from --redis-password"},
		{name: "URLs that differ", redis: []string{"redis://:secret@a:1", "redis://:other@b:1"},
			wantErr: "the URLs disagree"},
		{name: "no port", redis: []string{"redis://:secret@a"}, wantErr: "no port"},
		{name: "plain address without port", redis: []string{"localhost"}, wantErr: "want host:port"},
		{name: "unknown scheme", redis: []string{"memcache://a:1"}, wantErr: `scheme "memcache"`},
		{name: "Unix socket", redis: []string{"unix:///run/redis/redis.sock"},
			want: redisstore.Config{Addrs: []string{"/run/redis/redis.sock"}, Network: redisstore.NetworkUnix}},
		{name: "Unix socket with password and database", redis: []string{"redis+unix://app:secret@/run/redis.sock?db=3"},
			want: redisstore.Config{Addrs: []string{"/run/redis.sock"}, Network: redisstore.NetworkUnix, Username: "app", Password: "secret", DB: 3}},
		{name: "Unix socket with a host", redis: []string{"unix://run/redis.sock"}, wantErr: "want the socket's absolute path"},
		{name: "Unix socket without a path", redis: []string{"unix://"}, wantErr: "want the socket's absolute path"},
		{name: "Unix socket with another query", redis: []string{"unix:///r.sock?timeout=1s"}, wantErr: `query "timeout": only db=N`},
		{name: "Unix socket with a bad database", redis: []string{"unix:///r.sock?db=-1"}, wantErr: `database "-1"`},
		{name: "Unix socket among other addresses", redis: []string{"unix:///r.sock", "a:1"}, wantErr: "give it alone"},
		{name: "bad database", redis: []string{"redis://:secret@a:1/x"}, wantErr: `database "x"`},
		{name: "query", redis: []string{"redis://:secret@a:1/0?timeout=1s"}, wantErr: "query or fragment"},
		{name: "TLS files without TLS", redis: []string{"a:1"}, auth: RedisAuth{TLS: RedisTLS{CA: "ca.pem"}},
			wantErr: "TLS settings given without TLS"},
		{name: "missing CA file", redis: []string{"a:1"}, auth: RedisAuth{TLS: RedisTLS{Enabled: true, CA: "/nonexistent/ca.pem"}},
			wantErr: "--redis-tls-ca"},
		{name: "cert without key", redis: []string{"a:1"}, auth: RedisAuth{TLS: RedisTLS{Enabled: true, Cert: "c.pem"}},
			wantErr: "give both or neither"},
		{name: "--redis-sentinel with --redis", redis: []string{"a:1"}, auth: RedisAuth{Sentinel: "m@s1:26379"},
			wantErr: "give it alone"},
		{name: "--redis-sentinel with --redis-sentinel-master", auth: RedisAuth{Sentinel: "m@s1:26379", SentinelMaster: "m"},
			wantErr: "give it alone"},
		{name: "--redis-sentinel without master", auth: RedisAuth{Sentinel: "s1:26379"}, wantErr: "want master@host:port"},
		{name: "--redis-sentinel without port", auth: RedisAuth{Sentinel: "m@s1"}, wantErr: `Sentinel "s1": want host:port`},
		{name: "server name without TLS", redis: []string{"a:1"}, auth: RedisAuth{TLS: RedisTLS{ServerName: "r"}},
			wantErr: "TLS settings given without TLS"},
		{name: "server name and no name check", redis: []string{"a:1"},
			auth: RedisAuth{TLS: RedisTLS{Enabled: true, ServerName: "r", SkipHostnameVerification: true}}, wantErr: "give one"},
		{name: "password file and URL password", redis: []string{"redis://:secret@a:1"}, auth: RedisAuth{PasswordFile: "pw"},
			wantErr: "--redis-password-file: a password is given by --redis-password or the --redis URL too"},
		{name: "password file and flag", redis: []string{"a:1"}, auth: RedisAuth{PasswordFile: "pw", Password: "secret"},
			wantErr: "--redis-password-file: a password is given"},
		{name: "missing password file", redis: []string{"a:1"}, auth: RedisAuth{PasswordFile: "/nonexistent/pw"},
			wantErr: "--redis-password-file: open /nonexistent/pw"},
		{name: "sentinel password without master", redis: []string{"a:1"}, auth: RedisAuth{SentinelPassword: "s"},
			wantErr: "without --redis-sentinel-master"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := redisConfig(Config{Redis: tt.redis, RedisAuth: tt.auth})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Fatalf("error %q shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got.TLS != nil) != tt.wantTLS {
				t.Errorf("TLS = %v, want on: %v", got.TLS != nil, tt.wantTLS)
			}
			got.TLS = nil
			if strings.Join(got.Addrs, ",") != strings.Join(tt.want.Addrs, ",") || got.Username != tt.want.Username ||
				got.Password != tt.want.Password || got.DB != tt.want.DB || got.Sentinel != tt.want.Sentinel || got.Network != tt.want.Network {
				t.Errorf("config = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// --redis-password-file holds the password as a mounted secret does: one
// trailing newline (or CRLF) is dropped, anything else is the password's;
// an empty file is refused rather than sent as no password.
func TestRedisPasswordFile(t *testing.T) {
	tests := []struct {
		name, content, want, wantErr string
	}{
		{name: "bare", content: "s3cret", want: "s3cret"},
		{name: "newline", content: "s3cret\n", want: "s3cret"},
		{name: "CRLF", content: "s3cret\r\n", want: "s3cret"},
		{name: "spaces kept", content: " s3 cret \n", want: " s3 cret "},
		{name: "only one newline dropped", content: "s3cret\n\n", want: "s3cret\n"},
		{name: "empty", content: "", wantErr: "the file is empty"},
		{name: "only a newline", content: "\n", wantErr: "the file is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "password")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := redisConfig(Config{Redis: []string{"a:1"}, RedisAuth: RedisAuth{PasswordFile: path}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Password != tt.want {
				t.Fatalf("password = %q, %v; want %q", got.Password, err, tt.want)
			}
		})
	}
}

// A malformed address is errRedisURL, whatever the detail.
func TestRedisConfigErrorIsErrRedisURL(t *testing.T) {
	_, err := redisConfig(Config{Redis: []string{"redis://a"}})
	if !errors.Is(err, errRedisURL) {
		t.Fatalf("error = %v, want errRedisURL", err)
	}
}

// The store's name, logged at start, hides the password.
func TestMaskRedis(t *testing.T) {
	got := maskRedis("redis://app:secret@a:1/2,b:2,unix://app:secret@/r.sock?db=1")
	if want := "redis://app:xxxxx@a:1/2,b:2,unix://app:xxxxx@/r.sock?db=1"; got != want {
		t.Fatalf("maskRedis = %q, want %q", got, want)
	}
}
