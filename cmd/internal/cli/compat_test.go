package cli

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// compatServe applies --compat envoy-ratelimit to a fresh serve command
// with environ, and returns its flags' values and the notes.
func compatServe(t *testing.T, environ []string, args ...string) (map[string]string, []compatNote, error) {
	t.Helper()
	cmd := newServeCmd()
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	var c compatFlags
	err := c.apply(cmd.Flags(), append([]string{"FLOODGATE_COMPAT=envoy-ratelimit"}, environ...))
	values := map[string]string{}
	for _, name := range []string{"http", "grpc", "config", "redis", "redis-username", "redis-password", "redis-tls", "redis-tls-ca",
		"redis-tls-cert", "redis-tls-key", "redis-tls-skip-hostname-verification", "redis-sentinel-master", "redis-sentinel-username",
		"redis-sentinel-password", "redis-prefix", "log-format", "log-level", "shadow-mode", "quota-mode", "headers", "atomic", "count-denied-hits", "allow-empty-config", "merge-domains",
		"envoy-limit-headers", "envoy-limit-header", "envoy-remaining-header", "envoy-reset-header",
		"tls-cert", "tls-key", "tls-client-ca", "admin", "near-limit-ratio"} {
		values[name] = cmd.Flags().Lookup(name).Value.String()
	}
	return values, c.notes, err
}

// tcpRedis is a Redis over TCP, so that the cases do not depend on
// envoyproxy/ratelimit's default Unix socket.
var tcpRedis = []string{"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=10.0.0.5:6379"}

// Each of envoyproxy/ratelimit's variables maps to a flag, with its own
// defaults where it is not set; a value Floodgate cannot honour is an
// error that names the variable.
func TestEnvoyRatelimitVariables(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		want    map[string]string
		wantErr string
	}{
		{name: "its defaults", env: tcpRedis, want: map[string]string{
			"http": "0.0.0.0:8080", "grpc": "0.0.0.0:8081", "config": "/srv/runtime_data/current/config",
			"redis": "10.0.0.5:6379", "log-format": "text", "headers": "false", "atomic": "false", "count-denied-hits": "true",
			"redis-prefix": "floodgate:"}},
		{name: "listeners", env: append([]string{"HOST=127.0.0.1", "PORT=9080", "GRPC_HOST=::1", "GRPC_PORT=9081"}, tcpRedis...),
			want: map[string]string{"http": "127.0.0.1:9080", "grpc": "[::1]:9081"}},
		{name: "runtime directories", env: append([]string{"RUNTIME_ROOT=/data", "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_APPDIRECTORY=conf"}, tcpRedis...),
			want: map[string]string{"config": "/data/ratelimit/conf"}},
		{name: "password", env: append([]string{"REDIS_AUTH=s3cret"}, tcpRedis...),
			want: map[string]string{"redis-username": "", "redis-password": "s3cret"}},
		{name: "user and password", env: append([]string{"REDIS_AUTH=app:s3:cret"}, tcpRedis...),
			want: map[string]string{"redis-username": "app", "redis-password": "s3:cret"}},
		{name: "cluster", env: []string{"REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=CLUSTER", "REDIS_URL=a:7000,b:7001"},
			want: map[string]string{"redis": "a:7000,b:7001", "redis-sentinel-master": ""}},
		{name: "sentinel", env: []string{"REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=sentinel", "REDIS_URL=mymaster,s1:26379,s2:26379",
			"REDIS_AUTH=m", "REDIS_SENTINEL_AUTH=su:sp"},
			want: map[string]string{"redis": "s1:26379,s2:26379", "redis-sentinel-master": "mymaster", "redis-password": "m",
				"redis-sentinel-username": "su", "redis-sentinel-password": "sp"}},
		{name: "TLS", env: append([]string{"REDIS_TLS=true", "REDIS_TLS_CACERT=/ca.pem", "REDIS_TLS_CLIENT_CERT=/c.pem",
			"REDIS_TLS_CLIENT_KEY=/k.pem", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION=true"}, tcpRedis...),
			want: map[string]string{"redis-tls": "true", "redis-tls-ca": "/ca.pem", "redis-tls-cert": "/c.pem", "redis-tls-key": "/k.pem",
				"redis-tls-skip-hostname-verification": "true"}},
		{name: "TLS files without TLS are ignored, as there", env: append([]string{"REDIS_TLS_CACERT=/ca.pem"}, tcpRedis...),
			want: map[string]string{"redis-tls": "false", "redis-tls-ca": ""}},
		{name: "key prefix", env: append([]string{"CACHE_KEY_PREFIX=rl:"}, tcpRedis...), want: map[string]string{"redis-prefix": "rl:"}},
		{name: "json logs", env: append([]string{"LOG_FORMAT=JSON"}, tcpRedis...), want: map[string]string{"log-format": "json"}},
		{name: "anything else is text, as there", env: append([]string{"LOG_FORMAT=logfmt"}, tcpRedis...), want: map[string]string{"log-format": "text"}},
		{name: "log level unset: Floodgate's info", env: tcpRedis, want: map[string]string{"log-level": "info"}},
		{name: "log level in capitals", env: append([]string{"LOG_LEVEL=DEBUG"}, tcpRedis...), want: map[string]string{"log-level": "debug"}},
		{name: "trace is debug", env: append([]string{"LOG_LEVEL=trace"}, tcpRedis...), want: map[string]string{"log-level": "debug"}},
		{name: "warning is warn", env: append([]string{"LOG_LEVEL=Warning"}, tcpRedis...), want: map[string]string{"log-level": "warn"}},
		{name: "fatal is error", env: append([]string{"LOG_LEVEL=fatal"}, tcpRedis...), want: map[string]string{"log-level": "error"}},
		{name: "panic is error", env: append([]string{"LOG_LEVEL=PANIC"}, tcpRedis...), want: map[string]string{"log-level": "error"}},
		{name: "no increment over the limit", env: append([]string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true"}, tcpRedis...),
			want: map[string]string{"atomic": "true", "count-denied-hits": "false"}},
		{name: "start without a config", env: append([]string{"FORCE_START_WITHOUT_INITIAL_CONFIG=1"}, tcpRedis...),
			want: map[string]string{"allow-empty-config": "true"}},
		{name: "merged domains", env: append([]string{"MERGE_DOMAIN_CONFIG=true"}, tcpRedis...), want: map[string]string{"merge-domains": "true"}},
		{name: "domains not merged, its default", env: tcpRedis, want: map[string]string{"merge-domains": "false"}},
		{name: "its response headers", env: append([]string{"LIMIT_RESPONSE_HEADERS_ENABLED=true"}, tcpRedis...),
			want: map[string]string{"headers": "false", "envoy-limit-headers": "true", "envoy-limit-header": "RateLimit-Limit",
				"envoy-remaining-header": "RateLimit-Remaining", "envoy-reset-header": "RateLimit-Reset"}},
		{name: "its response headers, renamed", env: append([]string{"LIMIT_RESPONSE_HEADERS_ENABLED=true", "LIMIT_LIMIT_HEADER=X-Limit",
			"LIMIT_REMAINING_HEADER=X-Left", "LIMIT_RESET_HEADER=X-Reset"}, tcpRedis...),
			want: map[string]string{"headers": "false", "envoy-limit-headers": "true", "envoy-limit-header": "X-Limit",
				"envoy-remaining-header": "X-Left", "envoy-reset-header": "X-Reset"}},
		{name: "header names without the headers are ignored, as there", env: append([]string{"LIMIT_LIMIT_HEADER=X-Limit"}, tcpRedis...),
			want: map[string]string{"headers": "false", "envoy-limit-headers": "false", "envoy-limit-header": "RateLimit-Limit"}},
		{name: "gRPC over mTLS", env: append([]string{"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=/c", "GRPC_SERVER_TLS_KEY=/k",
			"GRPC_CLIENT_TLS_CACERT=/ca"}, tcpRedis...), want: map[string]string{"tls-cert": "/c", "tls-key": "/k", "tls-client-ca": "/ca"}},
		{name: "TLS files without TLS are ignored, as there", env: append([]string{"GRPC_SERVER_TLS_CERT=/c"}, tcpRedis...),
			want: map[string]string{"tls-cert": ""}},
		{name: "debug port: the admin listener", env: append([]string{"DEBUG_PORT=6070"}, tcpRedis...), want: map[string]string{"admin": "0.0.0.0:6070"}},
		{name: "no debug variables: no admin listener", env: tcpRedis, want: map[string]string{"admin": ""}},
		{name: "shadow and quota mode off", env: append([]string{"SHADOW_MODE=false", "QUOTA_MODE=false"}, tcpRedis...),
			want: map[string]string{"shadow-mode": "false", "quota-mode": "false"}},
		{name: "global shadow mode", env: append([]string{"SHADOW_MODE=true"}, tcpRedis...), want: map[string]string{"shadow-mode": "true", "quota-mode": "false"}},
		{name: "global quota mode", env: append([]string{"QUOTA_MODE=1"}, tcpRedis...), want: map[string]string{"shadow-mode": "false", "quota-mode": "true"}},

		{name: "unix socket, its default", env: nil, want: map[string]string{"redis": "unix:///var/run/nutcracker/ratelimit.sock"}},
		{name: "unix socket with a password", env: []string{"REDIS_SOCKET_TYPE=unix", "REDIS_URL=/run/redis/redis.sock", "REDIS_AUTH=s3cret"},
			want: map[string]string{"redis": "unix:///run/redis/redis.sock", "redis-password": "s3cret"}},
		{name: "a cluster is reached over TCP whatever the socket type, as there", env: []string{"REDIS_SOCKET_TYPE=unix", "REDIS_TYPE=cluster", "REDIS_URL=a:7000"},
			want: map[string]string{"redis": "a:7000"}},

		{name: "unix socket, relative path", env: []string{"REDIS_URL=run/redis.sock"}, wantErr: "REDIS_URL=run/redis.sock cannot be honoured: with REDIS_SOCKET_TYPE=unix it is the path"},
		{name: "unix socket with TLS", env: []string{"REDIS_URL=/run/redis.sock", "REDIS_TLS=true"}, wantErr: "REDIS_TLS=true cannot be honoured"},
		{name: "unknown socket type", env: []string{"REDIS_SOCKET_TYPE=udp", "REDIS_URL=a:1"}, wantErr: "REDIS_SOCKET_TYPE=udp cannot be honoured: want tcp or unix"},
		{name: "unknown Redis type", env: append([]string{"REDIS_TYPE=ring"}, tcpRedis...), wantErr: "REDIS_TYPE=ring"},
		{name: "sentinel without master", env: []string{"REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=sentinel", "REDIS_URL=s1:26379"},
			wantErr: "wants the master set's name"},
		{name: "two addresses for a single Redis", env: []string{"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=a:1,b:2"}, wantErr: "takes one address"},
		{name: "memcached", env: append([]string{"BACKEND_TYPE=memcache"}, tcpRedis...), wantErr: "no memcached store"},
		{name: "bad shadow mode", env: append([]string{"SHADOW_MODE=on"}, tcpRedis...), wantErr: `SHADOW_MODE="on": want true or false`},
		{name: "xDS", env: append([]string{"CONFIG_TYPE=GRPC_XDS_SOTW"}, tcpRedis...), wantErr: "CONFIG_TYPE=GRPC_XDS_SOTW"},
		{name: "gRPC on a Unix socket", env: append([]string{"GRPC_UDS=/tmp/rl.sock"}, tcpRedis...), wantErr: "GRPC_UDS"},
		{name: "gRPC over TLS without its files", env: append([]string{"GRPC_SERVER_USE_TLS=true"}, tcpRedis...),
			wantErr: "GRPC_SERVER_USE_TLS=true cannot be honoured: it needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"},
		{name: "mTLS with a SAN check", env: append([]string{"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=/c", "GRPC_SERVER_TLS_KEY=/k",
			"GRPC_CLIENT_TLS_CACERT=/ca", "GRPC_CLIENT_TLS_SAN=envoy"}, tcpRedis...), wantErr: "GRPC_CLIENT_TLS_SAN=envoy cannot be honoured"},
		{name: "bad boolean", env: append([]string{"REDIS_TLS=yes"}, tcpRedis...), wantErr: `REDIS_TLS="yes": want true or false`},
		{name: "unknown log level", env: append([]string{"LOG_LEVEL=verbose"}, tcpRedis...),
			wantErr: `LOG_LEVEL="verbose": want trace, debug, info, warn, warning, error, fatal or panic`},
		{name: "bad RUNTIME_WATCH_ROOT", env: append([]string{"RUNTIME_WATCH_ROOT=sometimes"}, tcpRedis...), wantErr: `RUNTIME_WATCH_ROOT="sometimes": want true or false`},
		{name: "bad port", env: append([]string{"PORT=http"}, tcpRedis...), wantErr: `PORT="http": want a port number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := compatServe(t, tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for flag, want := range tt.want {
				if got[flag] != want {
					t.Errorf("--%s = %q, want %q", flag, got[flag], want)
				}
			}
		})
	}
}

// A refusal is errCompat, for callers that tell it from a typo.
func TestEnvoyRatelimitRefusalIsErrCompat(t *testing.T) {
	_, _, err := compatServe(t, append([]string{"BACKEND_TYPE=memcache"}, tcpRedis...))
	if !errors.Is(err, errCompat) {
		t.Fatalf("error = %v, want errCompat", err)
	}
}

// NEAR_LIMIT_RATIO is Floodgate's --near-limit-ratio: the share of a limit
// at which its metrics and GET /admin/near-limit count a key as near it.
func TestEnvoyRatelimitNearLimitRatio(t *testing.T) {
	values, _, err := compatServe(t, append([]string{"NEAR_LIMIT_RATIO=0.9"}, tcpRedis...))
	if err != nil || values["near-limit-ratio"] != "0.9" {
		t.Fatalf("--near-limit-ratio = %q (%v), want 0.9", values["near-limit-ratio"], err)
	}
}

// Variables Floodgate does not need are accepted and each reported with
// its reason, never dropped in silence.
func TestEnvoyRatelimitIgnoredVariablesAreReported(t *testing.T) {
	env := append([]string{"USE_STATSD=true", "USE_PROMETHEUS=true", "LOCAL_CACHE_SIZE_IN_BYTES=1048576",
		"REDIS_PERSECOND=true", "REDIS_PERSECOND_URL=10.0.0.6:6379", "REDIS_POOL_SIZE=20", "GRPC_SERVER_TLS_KEY=/k", "RUNTIME_WATCH_ROOT=false",
		"TRACING_ENABLED=true"}, tcpRedis...)
	_, notes, err := compatServe(t, env)
	if err != nil {
		t.Fatal(err)
	}
	reported := map[string]string{}
	for _, n := range notes {
		reported[n.variable] = n.outcome
	}
	for _, v := range []string{"USE_STATSD", "USE_PROMETHEUS", "LOCAL_CACHE_SIZE_IN_BYTES", "REDIS_PERSECOND",
		"REDIS_PERSECOND_URL", "REDIS_POOL_SIZE", "GRPC_SERVER_TLS_KEY", "TRACING_ENABLED", "RUNTIME_WATCH_ROOT"} {
		if !strings.HasPrefix(reported[v], "ignored (") {
			t.Errorf("%s: reported %q, want ignored with a reason", v, reported[v])
		}
	}
	var buf bytes.Buffer
	c := compatFlags{mode: compatEnvoyRatelimit, notes: notes}
	c.report(slog.New(slog.NewTextHandler(&buf, nil)))
	if !strings.Contains(buf.String(), `msg="compat envoy-ratelimit: ignored (per-second limits are counted in the Redis of REDIS_URL with the others)" variable=REDIS_PERSECOND`) {
		t.Errorf("the start-up log does not report REDIS_PERSECOND:\n%s", buf.String())
	}
}

// A level Floodgate does not have is mapped to its nearest, and the
// start-up log says so.
func TestEnvoyRatelimitLogLevelNearest(t *testing.T) {
	_, notes, err := compatServe(t, append([]string{"LOG_LEVEL=fatal"}, tcpRedis...))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []compatNote{{"LOG_LEVEL", "mapped to --log-level"}, {"LOG_LEVEL", "fatal is error here, Floodgate's nearest level"}} {
		if !hasNote(notes, n.variable, n.outcome) {
			t.Errorf("notes %v: want %v", notes, n)
		}
	}
}

// Flags win over FLOODGATE_ variables, which win over the compatibility
// variables; --redis (or FLOODGATE_REDIS) sets every REDIS_ variable
// aside, so an unreachable default socket does not stop the start.
func TestCompatPrecedence(t *testing.T) {
	t.Setenv("FLOODGATE_GRPC", "127.0.0.1:7001")
	cmd := newServeCmd()
	if err := cmd.Flags().Parse([]string{"--http", "127.0.0.1:7000"}); err != nil {
		t.Fatal(err)
	}
	var c compatFlags
	env := append([]string{"FLOODGATE_COMPAT=envoy-ratelimit", "FLOODGATE_GRPC=127.0.0.1:7001", "PORT=9000", "GRPC_PORT=9001", "LOG_FORMAT=json"}, tcpRedis...)
	if err := c.apply(cmd.Flags(), env); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(cmd); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"http": "127.0.0.1:7000", "grpc": "127.0.0.1:7001", "log-format": "json"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
	for _, n := range []compatNote{
		{"HOST, PORT", "overridden by --http or FLOODGATE_HTTP"},
		{"GRPC_HOST, GRPC_PORT", "overridden by --grpc or FLOODGATE_GRPC"},
		{"LOG_FORMAT", "mapped to --log-format"},
	} {
		if !hasNote(c.notes, n.variable, n.outcome) {
			t.Errorf("notes %v: want %v", c.notes, n)
		}
	}

	got, notes, err := compatServe(t, []string{"REDIS_AUTH=x"}, "--redis", "127.0.0.1:6379")
	if err != nil {
		t.Fatalf("with --redis, the default Unix socket still refused: %v", err)
	}
	if got["redis"] != "127.0.0.1:6379" || got["redis-password"] != "" {
		t.Errorf("--redis %q, --redis-password %q: want the flag's address and no REDIS_AUTH", got["redis"], got["redis-password"])
	}
	if !hasNote(notes, "REDIS_AUTH", "ignored (--redis or FLOODGATE_REDIS is given)") {
		t.Errorf("notes %v: want REDIS_AUTH reported as set aside", notes)
	}
}

// Without the switch nothing is read; an unknown switch is an error.
func TestCompatSwitch(t *testing.T) {
	cmd := newServeCmd()
	var c compatFlags
	if err := c.apply(cmd.Flags(), []string{"PORT=9000"}); err != nil || len(c.notes) != 0 {
		t.Fatalf("apply without the switch = %v, notes %v", err, c.notes)
	}
	if got := cmd.Flags().Lookup("http").Value.String(); got != "127.0.0.1:8080" {
		t.Fatalf("--http = %q: PORT was read without the switch", got)
	}
	if err := c.apply(cmd.Flags(), []string{"FLOODGATE_COMPAT=envoy"}); err == nil || !strings.Contains(err.Error(), `--compat "envoy": want envoy-ratelimit`) {
		t.Fatalf("apply with an unknown switch = %v", err)
	}
}

func hasNote(notes []compatNote, variable, outcome string) bool {
	for _, n := range notes {
		if n.variable == variable && n.outcome == outcome {
			return true
		}
	}
	return false
}
