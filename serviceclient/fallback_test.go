package serviceclient_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/serviceclient"
)

// When the service is gone, the fallback decides, and says why: FailOpen
// allows, FailClosed denies with a RetryAfter, FailLocal enforces this
// node's share of the limit (4 a minute over 2 nodes: 2). Without a
// fallback the error is returned.
func TestFallbackDecidesWhenTheServiceIsStopped(t *testing.T) {
	srv := startServe(t)
	srv.stop()
	limit := floodgate.PerMinute(4)
	cases := []struct {
		mode    failover.Mode
		allowed []bool // explicit decisions in a row
		policy  bool   // a policy decision allowed
	}{
		{failover.FailOpen, []bool{true, true, true}, true},
		{failover.FailClosed, []bool{false, false}, false},
		{failover.FailLocal, []bool{true, true, false}, false},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			c := newClient(t, serviceclient.Options{HTTP: srv.HTTP, Timeout: time.Second,
				Fallback: failover.Config{Mode: tc.mode, Nodes: 2}})
			for i, want := range tc.allowed {
				var notes observe.Notes
				d, err := c.AllowN(observe.WithNotes(patient(t), &notes), "frank", limit, 1)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if d.Allowed != want || (!d.Allowed && d.RetryAfter <= 0) {
					t.Errorf("request %d: %+v, want allowed %v (a denial with a RetryAfter)", i, d, want)
				}
				if degraded, cause := notes.Degraded(); !degraded || !errors.Is(cause, floodgate.ErrStoreUnavailable) {
					t.Errorf("request %d: notes say degraded %v, cause %v; want degraded by ErrStoreUnavailable", i, degraded, cause)
				}
			}
			r, err := c.Decide(patient(t), "shop", user("frank"), 1)
			if tc.mode == failover.FailLocal {
				if !errors.Is(err, floodgate.ErrStoreUnavailable) || !errors.Is(err, serviceclient.ErrNoLocalLimit) {
					t.Errorf("policy decision under FailLocal: %+v, %v; want the error (no limit known for frank)", r, err)
				}
				return
			}
			if err != nil || r.Allowed != tc.policy || !errors.Is(r.Degraded, floodgate.ErrStoreUnavailable) {
				t.Errorf("policy decision: %+v, %v; want allowed %v, degraded by ErrStoreUnavailable", r, err, tc.policy)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		c := newClient(t, serviceclient.Options{HTTP: srv.HTTP, Timeout: time.Second})
		if _, err := c.AllowN(patient(t), "frank", limit, 1); !errors.Is(err, floodgate.ErrStoreUnavailable) {
			t.Errorf("explicit: error %v, want ErrStoreUnavailable", err)
		}
		if _, err := c.Decide(patient(t), "shop", user("frank"), 1); !errors.Is(err, floodgate.ErrStoreUnavailable) {
			t.Errorf("policy: error %v, want ErrStoreUnavailable", err)
		}
	})
}

// A service that takes calls and never answers costs a decision its
// Timeout, then the fallback decides: over HTTP and over gRPC.
func TestFallbackDecidesWithinTheTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accept, read nothing, answer nothing
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	const timeout = 50 * time.Millisecond
	probe := timing.StartProbe(t)
	for _, tc := range []struct {
		name string
		opts serviceclient.Options
	}{
		{"http", serviceclient.Options{HTTP: "http://" + ln.Addr().String()}},
		{"grpc", serviceclient.Options{GRPCAddr: ln.Addr().String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Timeout = timeout
			tc.opts.Fallback = failover.Config{Mode: failover.FailOpen}
			c := newClient(t, tc.opts)
			start := time.Now()
			r, err := c.Decide(context.Background(), "shop", user("gina"), 1)
			took := time.Since(start)
			if err != nil || !r.Allowed || !errors.Is(r.Degraded, floodgate.ErrStoreUnavailable) {
				t.Errorf("%+v, %v; want allowed by the fallback", r, err)
			}
			if over := probe.Over(start, took, timeout); over > timing.Slack {
				t.Errorf("took %s, %s past the timeout %s beyond the machine's lateness (%s)", took, over, timeout, probe)
			}
		})
	}
}
