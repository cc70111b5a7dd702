package loadgen

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	p, err := Config{Target: TargetGRPC, Addr: "127.0.0.1:8081"}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if p.Concurrency != DefaultConcurrency || p.Conns != DefaultConns || p.Duration != DefaultDuration ||
		p.Keys != DefaultKeys || p.Domain != DefaultDomain || p.DescriptorKey != DefaultDescriptorKey ||
		p.Cost != DefaultCost || p.Timeout != DefaultTimeout || p.Requests != 0 || p.Rate != 0 {
		t.Errorf("defaults not applied: %+v", p.Config)
	}
}

func TestConfigValidation(t *testing.T) {
	grpc := func(mod func(*Config)) Config {
		c := Config{Target: TargetGRPC, Addr: "127.0.0.1:8081"}
		mod(&c)
		return c
	}
	http := func(mod func(*Config)) Config {
		c := Config{Target: TargetHTTP, Addr: "127.0.0.1:8080"}
		mod(&c)
		return c
	}
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string
		msg   string // a fragment the message must contain
	}{
		{"no target", Config{Addr: "127.0.0.1:1"}, "Target", `want "grpc", "http" or "gubernator"`},
		{"bad target", Config{Target: "GRPC", Addr: "127.0.0.1:1"}, "Target", `"GRPC"`},
		{"no addr", Config{Target: TargetGRPC}, "Addr", "empty"},
		{"grpc addr without port", grpc(func(c *Config) { c.Addr = "localhost" }), "Addr", "not host:port"},
		{"grpc addr as URL", grpc(func(c *Config) { c.Addr = "http://localhost:1" }), "Addr", "not host:port"},
		{"http bad scheme", http(func(c *Config) { c.Addr = "ftp://localhost:1" }), "Addr", "scheme"},
		{"http query", http(func(c *Config) { c.Addr = "http://localhost:1/?a=b" }), "Addr", "query"},
		{"http no host", http(func(c *Config) { c.Addr = "http:///x" }), "Addr", "no host"},
		{"negative concurrency", grpc(func(c *Config) { c.Concurrency = -1 }), "Concurrency", "-1"},
		{"huge concurrency", grpc(func(c *Config) { c.Concurrency = MaxConcurrency + 1 }), "Concurrency", "maximum"},
		{"negative conns", grpc(func(c *Config) { c.Conns = -2 }), "Conns", "-2"},
		{"conns for http", http(func(c *Config) { c.Conns = 2 }), "Conns", "only to the gRPC targets"},
		{"conns above concurrency", grpc(func(c *Config) { c.Conns, c.Concurrency = 5, 4 }), "Conns", "idle"},
		{"negative duration", grpc(func(c *Config) { c.Duration = -time.Second }), "Duration", "-1s"},
		{"negative requests", grpc(func(c *Config) { c.Requests = -1 }), "Requests", "-1"},
		{"negative rate", grpc(func(c *Config) { c.Rate = -5 }), "Rate", "-5"},
		{"NaN rate", grpc(func(c *Config) { c.Rate = math.NaN() }), "Rate", "NaN"},
		{"infinite rate", grpc(func(c *Config) { c.Rate = math.Inf(1) }), "Rate", "Inf"},
		{"negative keys", grpc(func(c *Config) { c.Keys = -3 }), "Keys", "-3"},
		{"blank descriptor key", grpc(func(c *Config) { c.DescriptorKey = " " }), "DescriptorKey", "blank"},
		{"blank domain", grpc(func(c *Config) { c.Domain = "\t" }), "Domain", "blank"},
		{"negative cost", grpc(func(c *Config) { c.Cost = -1 }), "Cost", "-1"},
		{"cost beyond uint32", grpc(func(c *Config) { c.Cost = math.MaxUint32 + 1 }), "Cost", "maximum"},
		{"negative timeout", grpc(func(c *Config) { c.Timeout = -time.Millisecond }), "Timeout", "-1ms"},
		{"limit for grpc", grpc(func(c *Config) { c.Limit = "token_bucket:1/1s" }), "Limit", "only to the http and gubernator targets"},
		{"bad limit", http(func(c *Config) { c.Limit = "token_bucket:0/1s" }), "Limit", "rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.resolve()
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			if ce.Field != tc.field {
				t.Errorf("error %q names field %q, want %q", err, ce.Field, tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not mention %q and %q", err, tc.field, tc.msg)
			}
		})
	}
}

func TestConfigAcceptsEdgeValues(t *testing.T) {
	for _, c := range []Config{
		{Target: TargetGRPC, Addr: "[::1]:8081", Concurrency: MaxConcurrency, Conns: MaxConcurrency},
		{Target: TargetGRPC, Addr: "localhost:8081", Cost: math.MaxUint32, Rate: 0.5},
		{Target: TargetHTTP, Addr: "https://rl.internal/api", Conns: 1, Limit: "fixed_window:10/1m"},
	} {
		if _, err := c.resolve(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestAllowURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8080":               "http://127.0.0.1:8080/v1/allow",
		"localhost:8080":               "http://localhost:8080/v1/allow",
		"http://127.0.0.1:8080":        "http://127.0.0.1:8080/v1/allow",
		"http://127.0.0.1:8080/":       "http://127.0.0.1:8080/v1/allow",
		"https://rl.example/floodgate": "https://rl.example/floodgate/v1/allow",
		" http://[::1]:80/a/ ":         "http://[::1]:80/a/v1/allow",
	} {
		got, err := allowURL(in)
		if err != nil || got != want {
			t.Errorf("allowURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
