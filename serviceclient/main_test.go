package serviceclient_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// floodgateBin is `floodgate`, built once by TestMain from the workspace,
// so that the tests talk to the real service.
var floodgateBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "serviceclient-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	floodgateBin = filepath.Join(dir, "floodgate")
	build := exec.Command("go", "build", "-o", floodgateBin, "./cmd/floodgate")
	build.Dir = ".."
	code := 1
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building floodgate: %v\n%s", err, out)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// testPolicy is the policy the tests' service enforces: 3 requests a
// minute per user (a fixed window, as Envoy's service counts).
const testPolicy = `domain: shop
descriptors:
  - key: user
    rate_limit:
      name: per-user
      unit: minute
      requests_per_unit: 3
`

// service is a running `floodgate serve`.
type service struct {
	HTTP string // base URL
	GRPC string // address
	cmd  *exec.Cmd
}

// startServe runs `floodgate serve` with testPolicy on ports the system
// picks, waits for /readyz, and stops it by its PID with the test.
func startServe(t testing.TB, args ...string) *service {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(testPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--log-format", "json",
		"--shutdown-delay", "0", "--config", policy}, args...)
	cmd := exec.Command(floodgateBin, args...)
	cmd.Env = []string{}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &service{cmd: cmd}
	t.Cleanup(s.stop)
	addrs, err := testkit.ReadServing(stderr)
	if err != nil {
		t.Fatalf("floodgate %s: %v", strings.Join(args, " "), err)
	}
	go io.Copy(io.Discard, stderr)
	s.HTTP, s.GRPC = "http://"+addrs.HTTP, addrs.GRPC
	waitReady(t, s.HTTP)
	return s
}

// stop ends the service by its PID and waits for it; safe to call twice.
func (s *service) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// waitReady polls /readyz until it answers 200, for at most
// timing.Patience.
func waitReady(t testing.TB, base string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s/readyz not ready within %s", base, timing.Patience)
		case <-tick.C:
		}
	}
}

// counting is an http.RoundTripper that counts the calls it passes on.
type counting struct {
	n atomic.Int64
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}
