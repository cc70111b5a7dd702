package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// TestMain runs the package's in-process commands without a grace period
// on shutdown: each test's cleanup cancels its command (as SIGTERM would)
// and would otherwise wait the default --shutdown-delay. The drain's own
// tests give their flags; built binaries run without FLOODGATE_ variables.
func TestMain(m *testing.M) {
	os.Setenv("FLOODGATE_SHUTDOWN_DELAY", "0")
	os.Exit(m.Run())
}

// Bad listener flags are refused, naming the flag or the variable.
func TestListenFlagsRefuseBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string // NAME=value
		want string
	}{
		{args: []string{"serve", "--read-timeout", "-1s"}, want: "--read-timeout"},
		{args: []string{"serve", "--idle-timeout", "soon"}, want: "--idle-timeout"},
		{args: []string{"serve", "--max-header-bytes", "0"}, want: "--max-header-bytes"},
		{args: []string{"proxy", "--upstream", "http://127.0.0.1:1", "--limit", "1/s", "--upstream-timeout", "0s"}, want: "--upstream-timeout"},
		{args: []string{"proxy", "--upstream", "http://127.0.0.1:1", "--limit", "1/s", "--shutdown-timeout", "-5s"}, want: "--shutdown-timeout"},
		{args: []string{"serve"}, env: "FLOODGATE_WRITE_TIMEOUT=-1s", want: "FLOODGATE_WRITE_TIMEOUT"},
		{args: []string{"proxy", "--upstream", "http://127.0.0.1:1", "--limit", "1/s"}, env: "FLOODGATE_SEND_TIMEOUT=-1s", want: "FLOODGATE_SEND_TIMEOUT"},
	} {
		t.Run(strings.Join(tc.args, " ")+" "+tc.env, func(t *testing.T) {
			if name, value, ok := strings.Cut(tc.env, "="); ok {
				t.Setenv(name, value)
			}
			var out strings.Builder
			if code := Main(context.Background(), tc.args, &out, &out); code != 1 || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("exit %d, %q; want 1 and an error naming %s", code, out.String(), tc.want)
			}
		})
	}
}

// The proxy's listener closes connections that hold it, each no sooner
// than its flag's bound (serve's listeners: cmd/internal/server).
func TestProxyListenerBounds(t *testing.T) {
	const bound = 200 * time.Millisecond
	addr := startProxy(t, "--limit", "1000/s", "--read-header-timeout", bound.String(),
		"--read-timeout", (2 * bound).String(), "--idle-timeout", bound.String())
	for _, tc := range []struct {
		name, send string
		bound      time.Duration
	}{
		{"half the headers", "GET / HTTP/1.1\r\nHost: x\r\n", bound},
		{"half the body", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{", 2 * bound},
		{"keep-alive connection left idle", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", bound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if took := servicetest.ClosedAfter(t, addr, tc.send); took < tc.bound {
				t.Fatalf("closed after %v, before its bound %v", took, tc.bound)
			}
		})
	}
}

// drainGrace is the binaries' --shutdown-delay in the SIGTERM test: real
// time, long enough that each busy keep-alive client sends a request in
// it (they send back to back).
const drainGrace = 2 * time.Second

// SIGTERM under keep-alive load: serve and proxy (each mode) drain and
// exit 0, and no request fails on a reused connection; the proxy's
// request held by a hanging upstream gets its 504.
func TestSIGTERMDrainsUnderKeepAliveLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildFloodgate(t)
	hanging := make(chan struct{}, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			hanging <- struct{}{}
			<-r.Context().Done()
			return
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	defer upstream.Close()
	policy := writePolicy(t, "domain: gw\ndescriptors: []\nroutes:\n  - name: all\n    descriptors: []\n")
	proxyArgs := []string{"proxy", "--http", "127.0.0.1:0", "--upstream", upstream.URL, "--upstream-timeout", "1s"}
	for _, tc := range []struct {
		name  string
		args  []string
		path  string
		body  string
		hangs bool // send a request to the hanging upstream before SIGTERM
	}{
		{"serve", []string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"}, "/v1/allow",
			`{"domain":"example","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}`, false},
		{"proxy --limit", append(proxyArgs, "--limit", "1000000/s"), "/items", `{}`, true},
		{"proxy --config", append(proxyArgs, "--config", policy), "/items", `{}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startBinary(t, bin, append(tc.args, "--shutdown-delay", drainGrace.String()))
			load := servicetest.StartKeepAliveLoad("http://"+p.addr+tc.path, tc.body, 8)
			defer load.Stop()
			if err := load.WaitEach(timing.Patience, "been answered", func(c servicetest.LoadTally) bool { return c.OK > 0 }); err != nil {
				t.Fatal(err)
			}
			hung := make(chan string, 1)
			if tc.hangs {
				go func() { hung <- hangingRequest("http://" + p.addr + "/hang") }()
				<-hanging
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			code := p.wait(t)
			total := load.Stop()
			t.Logf("SIGTERM under keep-alive load: %v", total)
			if code != 0 {
				t.Fatalf("exit code %d after SIGTERM, want 0; logs:\n%s", code, tail(p.logs.String(), 40))
			}
			if total.Failed != 0 || total.Closing == 0 {
				t.Fatalf("%v; want none failed on a reused connection and some told Connection: close: %q", total, total.Errors)
			}
			if tc.hangs {
				if got := <-hung; got != "504" {
					t.Fatalf("the request to the hanging upstream: %s, want 504", got)
				}
			}
		})
	}
}

// hangingRequest GETs url and returns the status, or the error.
func hangingRequest(url string) string {
	client := &http.Client{Timeout: timing.Patience}
	resp, err := client.Get(url)
	if err != nil {
		return err.Error()
	}
	resp.Body.Close()
	return fmt.Sprint(resp.StatusCode)
}

// servingAddr is the HTTP address in serve's and proxy's startup line.
var servingAddr = regexp.MustCompile(`serving"? http=(\S+)`)

// process is a floodgate binary running under the test.
type process struct {
	cmd    *exec.Cmd
	addr   string
	logs   *servicetest.SyncBuffer
	exited chan struct{}
}

// startBinary runs bin with args (without FLOODGATE_ variables) until it
// logs its HTTP address; the test's cleanup kills it if it still runs.
func startBinary(t *testing.T, bin string, args []string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), logs: &servicetest.SyncBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = withoutFloodgateEnv(os.Environ())
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	deadline := time.After(timing.Patience)
	for {
		if m := servingAddr.FindStringSubmatch(p.logs.String()); m != nil {
			p.addr = m[1]
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("floodgate %s exited before serving:\n%s", strings.Join(args, " "), p.logs)
		case <-deadline:
			t.Fatalf("floodgate %s did not serve:\n%s", strings.Join(args, " "), p.logs)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *process) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timing.Patience):
		t.Fatalf("still running %v after SIGTERM; logs:\n%s", timing.Patience, tail(p.logs.String(), 40))
	}
	return p.cmd.ProcessState.ExitCode()
}
