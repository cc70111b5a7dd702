package serviceclient_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/serviceclient"
)

// patient is a context for calls that must be answered: bounded only so
// that a hang fails the test.
func patient(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, opts serviceclient.Options) *serviceclient.Client {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second // the service answers; a busy machine may be slow
	}
	c, err := serviceclient.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// An explicit limit decided through the client gives the answers the
// service gives: a bucket of 2 lets two requests pass, then denies with
// the wait for the next token.
func TestExplicitDecisionsAreTheService(t *testing.T) {
	srv := startServe(t)
	c := newClient(t, serviceclient.Options{HTTP: srv.HTTP, CacheSize: -1})
	limit := floodgate.PerMinute(2)
	want := []struct {
		allowed   bool
		remaining int64
	}{{true, 1}, {true, 0}, {false, 0}}
	for i, w := range want {
		d, err := c.AllowN(patient(t), "alice", limit, 1)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if d.Allowed != w.allowed || d.Remaining != w.remaining || d.Limit != 2 {
			t.Errorf("request %d: %+v, want allowed %v, remaining %d, limit 2", i, d, w.allowed, w.remaining)
		}
		if !d.Allowed && (d.RetryAfter <= 0 || d.RetryAfter > 30*time.Second) {
			t.Errorf("request %d: RetryAfter %s, want in (0, 30s]: one token of 2/min", i, d.RetryAfter)
		}
	}
}

// Bad input is refused before a call, with an error naming it.
func TestBadInputIsRefused(t *testing.T) {
	c := newClient(t, serviceclient.Options{HTTP: "http://127.0.0.1:1"})
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"empty key", func() error { _, err := c.AllowN(patient(t), "", floodgate.PerSecond(1), 1); return err }, floodgate.ErrInvalidKey},
		{"negative cost", func() error { _, err := c.AllowN(patient(t), "k", floodgate.PerSecond(1), -1); return err }, floodgate.ErrInvalidCost},
		{"bad limit", func() error { _, err := c.AllowN(patient(t), "k", floodgate.Limit{}, 1); return err }, floodgate.ErrInvalidLimit},
		{"empty domain", func() error { _, err := c.Decide(patient(t), "", user("a"), 1); return err }, serviceclient.ErrRejected},
		{"no descriptors", func() error { _, err := c.Decide(patient(t), "shop", nil, 1); return err }, serviceclient.ErrRejected},
		{"empty entry key", func() error {
			_, err := c.Decide(patient(t), "shop", []serviceclient.Descriptor{{Entries: []serviceclient.Entry{{}}}}, 1)
			return err
		}, serviceclient.ErrRejected},
	}
	for _, tc := range cases {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want one wrapping %v", tc.name, err, tc.want)
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	cases := []struct {
		name string
		opts serviceclient.Options
	}{
		{"nothing to ask", serviceclient.Options{}},
		{"not a URL", serviceclient.Options{HTTP: "127.0.0.1:8080"}},
		{"negative timeout", serviceclient.Options{HTTP: "http://127.0.0.1:1", Timeout: -1}},
		{"batching over HTTP", serviceclient.Options{HTTP: "http://127.0.0.1:1", Batch: &serviceclient.Batch{}}},
		{"batch too large", serviceclient.Options{GRPCAddr: "127.0.0.1:1", Batch: &serviceclient.Batch{MaxDescriptors: 65}}},
		{"unknown fallback", serviceclient.Options{HTTP: "http://127.0.0.1:1", Fallback: failoverConfig("maybe")}},
		{"unknown limit without fail_local", serviceclient.Options{HTTP: "http://127.0.0.1:1", UnknownLimit: "fail_open", Fallback: failoverConfig("fail_closed")}},
		{"unknown limit fail_local", serviceclient.Options{HTTP: "http://127.0.0.1:1", UnknownLimit: "fail_local", Fallback: failoverConfig("fail_local")}},
	}
	for _, tc := range cases {
		if _, err := serviceclient.New(tc.opts); !errors.Is(err, serviceclient.ErrInvalidOptions) {
			t.Errorf("%s: error %v, want one wrapping ErrInvalidOptions", tc.name, err)
		}
	}
}

// An explicit decision on a gRPC-only client says why it cannot be made.
func TestExplicitNeedsHTTP(t *testing.T) {
	c := newClient(t, serviceclient.Options{GRPCAddr: "127.0.0.1:1"})
	if _, err := c.AllowN(patient(t), "k", floodgate.PerSecond(1), 1); !errors.Is(err, serviceclient.ErrNoHTTP) {
		t.Errorf("error %v, want ErrNoHTTP", err)
	}
}

func user(names ...string) []serviceclient.Descriptor {
	out := make([]serviceclient.Descriptor, len(names))
	for i, n := range names {
		out[i] = serviceclient.Descriptor{Entries: []serviceclient.Entry{{Key: "user", Value: n}}}
	}
	return out
}

var _ http.RoundTripper = (*counting)(nil)
