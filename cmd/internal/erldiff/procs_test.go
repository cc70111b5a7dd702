package erldiff

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// startPatience bounds how long a service gets to say it serves; both
// need well under a second, a busy machine several.
const startPatience = 30 * time.Second

// errConfigRejected means a service refused the scenario's configuration.
var errConfigRejected = errors.New("configuration rejected")

// process is one service under test, stopped by its PID.
type process struct {
	name string
	cmd  *exec.Cmd
	logs servicetest.SyncBuffer
	done chan struct{}
	once sync.Once
}

func startProcess(name string, cmd *exec.Cmd) (*process, error) {
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.logs, &p.logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop kills the process by its PID and reaps it.
func (p *process) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitFor polls the process's log until ready finds what it waits for, the
// process exits, or startPatience passes.
func (p *process) waitFor(ready func(log string) (bool, error)) error {
	deadline := time.Now().Add(startPatience)
	for {
		ok, err := ready(p.logs.String())
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		case p.exited():
			return fmt.Errorf("%s exited before serving:\n%s", p.name, p.logs.String())
		case time.Now().After(deadline):
			return fmt.Errorf("%s did not serve within %v:\n%s", p.name, startPatience, p.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childEnv is this process's environment without the FLOODGATE_ variables
// (serve reads its flags from them, and this test's own settings are
// FLOODGATE_ERL_*), plus extra.
func childEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLOODGATE_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// buildFloodgate builds the floodgate binary of this working tree once
// per test binary run.
func buildFloodgate(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "floodgate")
	build := exec.Command("go", "build", "-o", bin, "./floodgate")
	build.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./floodgate (in cmd/): %v\n%s", err, out)
	}
	return bin
}

// writeConfig lays the scenario's files out as envoyproxy/ratelimit reads
// them ($RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/config/*.yaml); floodgate reads
// the same directory.
func writeConfig(t *testing.T, s *scenario) (root, dir string) {
	t.Helper()
	root = t.TempDir()
	dir = filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range s.files {
		if err := os.WriteFile(filepath.Join(dir, f.Domain+".yaml"), f.yaml(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, dir
}

// freePorts reserves n loopback ports at once and frees them for the
// child to bind; a port lost to a race shows as a failed start, retried.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// erlLogs are envoyproxy/ratelimit's log lines this test reads: its gRPC
// listener, and a configuration it could not load (it keeps running
// without one and answers every request with an error).
var (
	erlServing  = regexp.MustCompile(`Listening for gRPC on '([^']+)'`)
	erlRejected = regexp.MustCompile(`Error loading new configuration: (.*)`)
	erlBusyPort = regexp.MustCompile(`address already in use`)
)

// startAttempts bounds the retries of a start that lost its ports.
const startAttempts = 3

// startERL runs envoyproxy/ratelimit on the scenario's files against its
// own Redis, with its defaults (stats off, as a load test would), and
// returns its gRPC address.
func startERL(t *testing.T, bin, root, redisAddr string, headers bool, env []string) (*process, string, error) {
	t.Helper()
	var err error
	for range startAttempts {
		var p *process
		var addr string
		p, addr, err = startERLOnce(bin, root, redisAddr, headers, env)
		if err == nil {
			t.Cleanup(p.stop)
			return p, addr, nil
		}
		if !errors.Is(err, errBusyPort) {
			break
		}
	}
	return nil, "", err
}

var errBusyPort = errors.New("port taken")

func startERLOnce(bin, root, redisAddr string, headers bool, env []string) (*process, string, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin)
	cmd.Env = childEnv(append([]string{
		"USE_STATSD=false", "DISABLE_STATS=true", "LOG_LEVEL=warn",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redisAddr,
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_APPDIRECTORY=config", "RUNTIME_WATCH_ROOT=false",
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[2]),
		"LIMIT_RESPONSE_HEADERS_ENABLED=" + strconv.FormatBool(headers),
	}, env...)...)
	p, err := startProcess("envoyproxy/ratelimit", cmd)
	if err != nil {
		return nil, "", err
	}
	var addr string
	err = p.waitFor(func(log string) (bool, error) {
		if m := erlRejected.FindStringSubmatch(log); m != nil {
			return false, fmt.Errorf("envoyproxy/ratelimit: %w: %s", errConfigRejected, m[1])
		}
		m := erlServing.FindStringSubmatch(log)
		if m == nil {
			return false, nil
		}
		addr = m[1]
		return true, nil
	})
	if err == nil {
		err = healthy(ports[0])
	}
	if err != nil {
		p.stop()
		if erlBusyPort.MatchString(p.logs.String()) {
			return nil, "", fmt.Errorf("%w: %v", errBusyPort, err)
		}
		return nil, "", err
	}
	return p, addr, nil
}

// healthy waits for envoyproxy/ratelimit's /healthcheck to answer OK. It
// logs its gRPC line once its listeners are set up, but its HTTP listener
// may not accept yet (connection refused, seen on a busy machine): a
// refused connection is asked again, for timing.Patience at most.
func healthy(port int) error {
	deadline := time.Now().Add(timing.Patience)
	for {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/healthcheck")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("envoyproxy/ratelimit /healthcheck: %s", resp.Status)
			}
			return nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return fmt.Errorf("envoyproxy/ratelimit /healthcheck: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fgServing is serve's startup line with its listen addresses.
var fgServing = regexp.MustCompile(`floodgate serving"? http=(\S+) grpc=(\S+)`)

// startFloodgate runs `floodgate serve` on the scenario's directory against
// its own Redis on free loopback ports, and returns its gRPC address. A
// configuration it refuses is errConfigRejected with its log.
func startFloodgate(t *testing.T, bin, dir, redisAddr string, headers bool, extra []string) (*process, string, error) {
	t.Helper()
	// --count-denied-hits: envoyproxy/ratelimit counts every hit, denied or
	// not, by default; the drop-in configuration (--compat envoy-ratelimit
	// sets it) is the one compared. --envoy-limit-headers is what
	// LIMIT_RESPONSE_HEADERS_ENABLED maps to under --compat envoy-ratelimit.
	args := append([]string{"serve", "--config", dir, "--redis", redisAddr, "--count-denied-hits",
		"--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--headers=false",
		"--envoy-limit-headers=" + strconv.FormatBool(headers)}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = childEnv()
	p, err := startProcess("floodgate "+strings.Join(args, " "), cmd)
	if err != nil {
		return nil, "", err
	}
	var addr string
	err = p.waitFor(func(log string) (bool, error) {
		if m := fgServing.FindStringSubmatch(log); m != nil {
			addr = m[2]
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		exited := p.exited()
		p.stop()
		if exited {
			return nil, "", fmt.Errorf("floodgate: %w: %s", errConfigRejected, lastLines(p.logs.String(), 5))
		}
		return nil, "", err
	}
	t.Cleanup(p.stop)
	return p, addr, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
