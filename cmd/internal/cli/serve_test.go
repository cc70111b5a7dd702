package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

var listening = regexp.MustCompile(`http=(\S+) grpc=(\S+)`)

// startServe runs `floodgate serve` in process on free ports and returns its
// HTTP and gRPC addresses; it stops when the test ends and must exit 0.
func startServe(t *testing.T, args ...string) (httpAddr, grpcAddr string, logs *servicetest.SyncBuffer) {
	t.Helper()
	m, logs := startCommand(t, listening, append([]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"}, args...))
	return m[1], m[2], logs
}

// startCommand runs a floodgate command in process until the test ends (a
// cancel, as SIGTERM would), when it must exit 0, and returns the
// submatches of the log line ready reports it started with.
func startCommand(t *testing.T, ready *regexp.Regexp, args []string) ([]string, *servicetest.SyncBuffer) {
	t.Helper()
	m, logs, _ := startStoppable(t, ready, args)
	return m, logs
}

// startStoppable is startCommand that also returns a stop function, for a
// test that reads what the command leaves behind when it stops (a flushed
// log, exported spans); stop is also called when the test ends.
func startStoppable(t *testing.T, ready *regexp.Regexp, args []string) ([]string, *servicetest.SyncBuffer, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &servicetest.SyncBuffer{}
	done := make(chan int, 1)
	go func() { done <- Main(ctx, args, logs, logs) }()
	stop := sync.OnceFunc(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("%s exited %d after SIGTERM-like cancel; logs:\n%s", args[0], code, logs)
			}
		case <-time.After(timing.Patience):
			t.Errorf("%s did not stop; logs:\n%s", args[0], logs)
		}
	})
	t.Cleanup(stop)
	deadline := time.Now().Add(timing.Patience)
	for time.Now().Before(deadline) {
		if m := ready.FindStringSubmatch(logs.String()); m != nil {
			return m, logs, stop
		}
		select {
		case code := <-done:
			t.Fatalf("%s exited %d; logs:\n%s", args[0], code, logs)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not start; logs:\n%s", args[0], logs)
	return nil, nil, nil
}

func allow(t *testing.T, httpAddr, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post("http://"+httpAddr+"/v1/allow", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func shouldRateLimit(t *testing.T, grpcAddr, domain string, kv ...string) *pb.RateLimitResponse {
	t.Helper()
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	d := &rlsv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlsv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	resp, err := pb.NewRateLimitServiceClient(conn).ShouldRateLimit(context.Background(),
		&pb.RateLimitRequest{Domain: domain, Descriptors: []*rlsv3.RateLimitDescriptor{d}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// The README's run command, in process: the built-in policy in memory.
// Its per-user limit is 10 a second, a fixed window: a request of cost 10
// takes the whole window, and a second one passes only in the next window,
// which the test tells by the clock before the first request and after
// the second (windows are aligned to the Unix epoch).
func TestServeWithTheBuiltInPolicy(t *testing.T) {
	httpAddr, grpcAddr, _ := startServe(t)
	const whole = `{"domain":"example","cost":10,"descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}`
	start := time.Now()
	if code, body := allow(t, httpAddr, whole); code != 200 {
		t.Fatalf("a request of cost 10: %d %v", code, body)
	}
	code, body := allow(t, httpAddr, whole)
	if sameWindow := time.Now().Truncate(time.Second).Equal(start.Truncate(time.Second)); code != 429 && (code != 200 || sameWindow) {
		t.Fatalf("a second request of cost 10 in the same window of a second: %d %v, want 429", code, body)
	}
	if r := shouldRateLimit(t, grpcAddr, "example", "remote_address", "127.0.0.1"); r.OverallCode != pb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 99 {
		t.Fatalf("gRPC: %v", r)
	}
}

// With --redis every decision counts in Redis: two servers share one limit.
func TestServeWithRedisSharesTheLimit(t *testing.T) {
	srv := testkit.StartServer(t)
	a, _, _ := startServe(t, "--redis", srv.Addr())
	b, grpcB, _ := startServe(t, "--redis", srv.Addr())
	body := `{"key":"shared","limit":{"algorithm":"fixed_window","rate":4,"period":"24h"}}`
	clearOfWindowEdge(t, 24*time.Hour)
	for i, addr := range []string{a, b, a, b} {
		if code, out := allow(t, addr, body); code != 200 {
			t.Fatalf("request %d: %d %v", i, code, out)
		}
	}
	if code, _ := allow(t, a, body); code != 429 {
		t.Fatalf("5th request across two servers: %d, want 429", code)
	}
	if r := shouldRateLimit(t, grpcB, "example", "remote_address", "127.0.0.9"); r.Statuses[0].LimitRemaining != 99 {
		t.Fatalf("gRPC through Redis: %v", r)
	}
	if n := srv.Do(t, "DBSIZE"); n == "0" {
		t.Fatal("nothing was stored in Redis")
	}
}

// Editing the policy file applies without a restart; a broken edit keeps
// the policy in force.
func TestServeReloadsItsConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.yaml")
	write := func(rate string) {
		if err := os.WriteFile(file, []byte("domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: "+rate+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1")
	httpAddr, _, logs := startServe(t, "--config", file)
	req := `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}`
	clearOfWindowEdge(t, 24*time.Hour)
	allow(t, httpAddr, req)
	if code, _ := allow(t, httpAddr, req); code != 429 {
		t.Fatalf("limit 1: second request %d", code)
	}
	write("5")
	waitFor(t, func() bool { code, _ := allow(t, httpAddr, req); return code == 200 }, "the raised limit to apply")
	write("five")
	waitFor(t, func() bool { return strings.Contains(logs.String(), "config reload failed") }, "the broken edit to be reported")
	if code, _ := allow(t, httpAddr, req); code != 200 {
		t.Fatalf("after a broken edit the old policy (5 a day) should still be in force: %d", code)
	}
}

// waitFor polls cond until it holds; timing.Patience bounds a hang.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(timing.Patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timing.Patience, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clearOfWindowEdge returns once the fixed window of length period that
// the real clock is in (windows are aligned to the Unix epoch) has more
// than timing.Patience left, waiting for the next one if need be: a test
// that counts in one window on the real clock then stays in it however
// slowly it runs. With windows of a day it waits once in 1,440 runs.
func clearOfWindowEdge(t *testing.T, period time.Duration) {
	t.Helper()
	if left := period - time.Duration(time.Now().UnixNano()%int64(period)); left <= timing.Patience {
		t.Logf("waiting %v for the next window of %v", left, period)
		time.Sleep(left + time.Second) // a second for the clocks of Redis and the limiter
	}
}

func TestServeRejectsBadSettings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--failure-mode", "fail_sometimes"}, nil, "fail_sometimes"},
		{[]string{"--config", "/nonexistent/policy.yaml"}, nil, "/nonexistent/policy.yaml"},
		{[]string{"--http", "256.0.0.1:80"}, nil, "--http"},
		{nil, map[string]string{"FLOODGATE_STORE_TIMEOUT": "soon"}, "FLOODGATE_STORE_TIMEOUT"},
		{[]string{"--log-format", "xml"}, nil, "--log-format"},
		{[]string{"--log-level", "verbose"}, nil, `"verbose" for "--log-level" flag: log level "verbose": want debug, info, warn, error`},
		{nil, map[string]string{"FLOODGATE_LOG_LEVEL": "WARNING"}, `FLOODGATE_LOG_LEVEL="WARNING": log level "WARNING": want debug, info, warn, error`},
		{[]string{"--envoy-limit-headers", "--envoy-reset-header", "Reset After"}, nil, `invalid header name for the reset header: "Reset After"`},
		{[]string{"--gc-heap-floor-mib", "-1"}, nil, `"-1" for "--gc-heap-floor-mib" flag: "-1": want a whole number of MiB from 0 (off) to 1048576`},
		{nil, map[string]string{"FLOODGATE_GC_HEAP_FLOOR_MIB": "64MB"}, `FLOODGATE_GC_HEAP_FLOOR_MIB="64MB"`},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append([]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"}, tc.args...), &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want an error naming %q", tc.args, tc.env, code, errOut.String(), tc.want)
		}
		for k := range tc.env {
			os.Unsetenv(k)
		}
	}
}

// With Redis gone, decisions follow the failure mode within the store
// timeout, the breaker's state reaches /metrics, and fail_closed limits make
// the service not ready.
func TestServeWhenRedisDies(t *testing.T) {
	// A request's bound: the store timeout (serve's default) and an HTTP
	// round trip on loopback, beyond what the scheduler was late.
	const roundTrip = 100 * time.Millisecond
	storeTimeout := failover.DefaultTimeout
	srv := testkit.StartServer(t)
	httpAddr, _, _ := startServe(t, "--redis", srv.Addr(), "--failure-mode", "fail_closed")
	body := `{"key":"k","limit":{"algorithm":"fixed_window","rate":100,"period":"1h"}}`
	if code, _ := allow(t, httpAddr, body); code != 200 {
		t.Fatalf("with Redis up: %d", code)
	}
	srv.Kill()
	probe := timing.StartProbe(t)
	for range 10 {
		start := time.Now()
		code, _ := allow(t, httpAddr, body)
		if took := time.Since(start); probe.Over(start, took, storeTimeout+roundTrip) > timing.Slack {
			t.Fatalf("a decision took %v with Redis down: more than %v, %v and the %v the scheduler was late; %v",
				took, storeTimeout, roundTrip, probe.Late(start, start.Add(took)), probe)
		}
		if code != 429 {
			t.Fatalf("fail_closed with Redis down: %d, want 429", code)
		}
	}
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}, "/readyz to report the outage")
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + httpAddr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return strings.Contains(b.String(), `floodgate_breaker_state{state="open"} 1`)
	}, "the open breaker in /metrics")
	srv.Restart(t)
	waitFor(t, func() bool { code, _ := allow(t, httpAddr, body); return code == 200 }, "recovery after Redis is back")
}
