// Package testkit holds the helpers that the library's tests share, and
// the service's with them.
//
// Above all it starts real redis-server processes, and real Redis Clusters
// built from them, for tests that must exercise Floodgate against an actual
// Redis rather than a fake: Lua scripts, TTL semantics, MOVED redirections
// and servers dying mid-load only behave faithfully there. Package
// internal/faults puts a fault-injecting proxy in front of one (a module of
// its own, for its dependencies); package cmd/internal/servicetest holds
// the helpers of the service's tests. Subpackage timing measures how late
// the machine runs a test, for tests whose bound is real time.
//
// Every server listens on a free port on 127.0.0.1, keeps nothing on disk
// (no RDB snapshots, no AOF) and lives in the test's temporary directory.
// It is killed, and its process reaped, in the test's Cleanup. Tests are
// skipped when the binaries are missing, so `go test ./...` stays green on
// machines without Redis; set REDISTEST_REQUIRE=1 (as CI should) to turn
// that skip into a failure.
//
// Servers and clusters are safe to start from parallel tests.
package testkit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// requireEnv names the variable that turns a missing binary from a skip into
// a failure, so CI cannot go green by silently skipping every Redis test.
const requireEnv = "REDISTEST_REQUIRE"

const (
	serverBinary = "redis-server"
	cliBinary    = "redis-cli"
)

// RequireBinaries skips the test unless every named binary is in PATH; with
// no names it checks for redis-server. Both redis-server and redis-cli come
// with Debian's redis-server package, hence the single install hint.
func RequireBinaries(tb testing.TB, names ...string) {
	tb.Helper()
	if len(names) == 0 {
		names = []string{serverBinary}
	}
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			msg := fmt.Sprintf("%s not found in PATH; install it (apt-get install redis-server) to run this test", name)
			if os.Getenv(requireEnv) != "" {
				tb.Fatalf("%s (%s is set)", msg, requireEnv)
			}
			tb.Skip(msg)
		}
	}
}

// Option customises a server started by StartServer or StartCluster.
type Option func(*serverConfig)

type serverConfig struct {
	args       []string
	password   string
	prefix     []string // a program that runs redis-server, with its arguments
	unixSocket bool
}

// UnderProgram runs redis-server under another program, e.g.
// UnderProgram("valgrind", "--tool=callgrind") to count its instructions.
// Such a server starts slowly: StartServer waits for it as for any other.
func UnderProgram(prefix ...string) Option {
	return func(c *serverConfig) { c.prefix = append([]string(nil), prefix...) }
}

// WithArgs appends extra redis-server command-line arguments, e.g.
// WithArgs("--maxmemory", "10mb"). A "--requirepass" given here is also
// remembered so that Do and Command authenticate.
func WithArgs(extra ...string) Option {
	return func(c *serverConfig) {
		c.args = append(c.args, extra...)
		if pw, ok := requirepass(extra); ok {
			c.password = pw
		}
	}
}

// WithUnixSocket makes the server listen on a Unix socket too, at
// Server.UnixSocket, as well as on its TCP port (where StartServer waits
// for it and Do and Command reach it).
func WithUnixSocket() Option {
	return func(c *serverConfig) { c.unixSocket = true }
}

// WithPassword protects the server with a password; Do and Command send AUTH
// with it before every command.
func WithPassword(password string) Option {
	return WithArgs("--requirepass", password)
}

func requirepass(args []string) (string, bool) {
	for i, a := range args {
		if strings.EqualFold(a, "--requirepass") && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// reserved holds every port handed out by this process and not yet released.
// The kernel may give the same ephemeral port to two callers between our
// probe and redis' bind; remembering them rules that out within one test
// binary, and the bind retry in StartServer covers other processes.
var reserved = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// clusterBusOffset is fixed by Redis: the cluster bus listens on port+10000.
const clusterBusOffset = 10000

// freePort returns a port on 127.0.0.1 that is free right now and reserves
// it. For cluster nodes the bus port, port+10000, must be free as well.
func freePort(cluster bool) (int, error) {
	const attempts = 100
	for i := 0; i < attempts; i++ {
		port, err := probePort(0)
		if err != nil {
			return 0, err
		}
		if cluster && (port+clusterBusOffset > 65535 || !portFree(port+clusterBusOffset)) {
			continue
		}
		if reserve(port, cluster) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on 127.0.0.1 after %d attempts", attempts)
}

func probePort(port int) (int, error) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(port int) bool {
	_, err := probePort(port)
	return err == nil
}

func reserve(port int, cluster bool) bool {
	reserved.Lock()
	defer reserved.Unlock()
	if reserved.ports[port] || (cluster && reserved.ports[port+clusterBusOffset]) {
		return false
	}
	reserved.ports[port] = true
	if cluster {
		reserved.ports[port+clusterBusOffset] = true
	}
	return true
}

func release(port int, cluster bool) {
	reserved.Lock()
	defer reserved.Unlock()
	delete(reserved.ports, port)
	if cluster {
		delete(reserved.ports, port+clusterBusOffset)
	}
}
