package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

const (
	// startTimeout is how long a server gets to answer after exec; a healthy
	// one needs a few milliseconds, so hitting this means something is wrong
	// (a busy machine can make it seconds).
	startTimeout = timing.Patience
	// stopTimeout bounds a graceful Stop before falling back to SIGKILL.
	stopTimeout = 10 * time.Second
	// pollInterval paces readiness polling: short enough not to slow tests
	// down, long enough not to spin two cores while redis boots.
	pollInterval = 10 * time.Millisecond
	// portAttempts limits how often StartServer moves to a fresh port after
	// losing a race for the one it probed.
	portAttempts = 5
	// logTailBytes caps how much of a server log is printed on failure.
	logTailBytes = 8 << 10
)

// errAddrInUse means redis-server exited because its port (or cluster bus
// port) was taken between our probe and its bind.
var errAddrInUse = errors.New("address already in use")

// Server is one redis-server process listening on 127.0.0.1. Its methods
// are safe for concurrent use, except that Do and Restart must be called
// from the test's own goroutine, like any method that may call tb.Fatalf.
type Server struct {
	bin     string
	dir     string
	sock    string // the Unix socket's path, with WithUnixSocket
	cluster bool
	cfg     serverConfig
	port    int // fixed once StartServer returns

	mu       sync.Mutex
	proc     *process // latest process, possibly exited
	starts   int      // numbers the log files so a restart keeps old logs
	reported *process // its log is already in a failure message
}

// process is one exec of redis-server; a Server has a new one per Restart.
type process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once cmd.Wait has returned
	err     error         // cmd.Wait's result, valid after done
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// StartServer starts a redis-server on a free port of 127.0.0.1 without
// persistence, waits until it answers, and kills it in tb.Cleanup. The test
// is skipped when redis-server is not installed.
func StartServer(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	return startServer(tb, false, opts)
}

func startServer(tb testing.TB, cluster bool, opts []Option) *Server {
	tb.Helper()
	RequireBinaries(tb, serverBinary)
	bin, err := exec.LookPath(serverBinary)
	if err != nil {
		tb.Fatalf("testkit: %v", err)
	}
	// TempDir before Cleanup: cleanups run last-in first-out, so the server
	// is dead before the testing package removes its directory.
	s := &Server{bin: bin, dir: tb.TempDir(), cluster: cluster}
	for _, opt := range opts {
		opt(&s.cfg)
	}
	if s.cfg.unixSocket {
		s.sock = shortSocketPath(tb)
	}
	tb.Cleanup(func() { s.cleanup(tb) })
	if err := s.startOnFreePort(); err != nil {
		tb.Fatalf("testkit: starting redis-server: %v", err)
	}
	return s
}

// startOnFreePort retries with a new port when another process grabbed the
// probed one before redis could bind it.
func (s *Server) startOnFreePort() error {
	deadline := time.Now().Add(startTimeout)
	var err error
	for i := 0; i < portAttempts; i++ {
		if s.port, err = freePort(s.cluster); err != nil {
			return err
		}
		if err = s.run(deadline); !errors.Is(err, errAddrInUse) {
			return err
		}
		release(s.port, s.cluster)
		s.port = 0
		// A failed cluster node has already written a nodes.conf naming
		// itself; start the next attempt with a clean identity.
		_ = os.Remove(s.nodesConf())
	}
	return fmt.Errorf("ports kept being taken after %d attempts: %w", portAttempts, err)
}

func (s *Server) cleanup(tb testing.TB) {
	if tb.Failed() && !s.logReported() {
		if log := s.Log(); log != "" {
			tb.Logf("testkit: log of redis-server %s:\n%s", s.Addr(), tail(log, logTailBytes))
		}
	}
	// No persistence means nothing to flush, so skip the graceful path.
	s.Kill()
	if s.port != 0 {
		release(s.port, s.cluster)
	}
}

// Addr returns "127.0.0.1:PORT".
func (s *Server) Addr() string {
	return "127.0.0.1:" + strconv.Itoa(s.port)
}

// UnixSocket is the path of the server's Unix socket ("" without
// WithUnixSocket).
func (s *Server) UnixSocket() string { return s.sock }

// maxSocketPath is the longest Unix socket path every platform takes
// (sun_path holds 104 bytes on the BSDs and macOS, 108 on Linux, with the
// terminating NUL).
const maxSocketPath = 103

// shortSocketPath is a path for a Unix socket in a directory of its own
// that is removed in tb.Cleanup. The test's TempDir can be longer than a
// socket path may be, so the directory is made in the system's temporary
// directory, or in /tmp when even that is too long.
func shortSocketPath(tb testing.TB) string {
	tb.Helper()
	const name = "r.sock"
	base := os.TempDir()
	if len(base)+len("/rs-0123456789/")+len(name) > maxSocketPath {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "rs-")
	if err != nil {
		tb.Fatalf("testkit: a directory for a Unix socket: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, name)
}

// Port returns the TCP port; the cluster bus of a cluster node is Port+10000.
func (s *Server) Port() int { return s.port }

// Pid is the process id of the running server (of the program it runs
// under, with UnderProgram); 0 when it is not running.
func (s *Server) Pid() int {
	if p := s.current(); p != nil && !p.exited() {
		return p.cmd.Process.Pid
	}
	return 0
}

// Running reports whether the server process is alive.
func (s *Server) Running() bool {
	p := s.current()
	return p != nil && !p.exited()
}

// Kill sends SIGKILL and waits for the process to exit, simulating a crash.
// It is a no-op on a server that is not running.
func (s *Server) Kill() {
	p := s.current()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill() // fails only if the process is already gone
	<-p.done
}

// Stop shuts the server down gracefully with SIGTERM, which Redis handles
// like SHUTDOWN (nothing is saved as persistence is off), and waits for it
// to exit; after 10s it falls back to SIGKILL.
func (s *Server) Stop() {
	p := s.current()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Restart starts the server again on the same port after Kill or Stop and
// waits until it answers. Data is gone; a cluster node keeps its identity
// and slots (they live in nodes.conf), see Cluster.WaitHealthy.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if s.Running() {
		tb.Fatalf("testkit: Restart of %s while it is running; call Kill or Stop first", s.Addr())
	}
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.run(deadline)
		if err == nil {
			return
		}
		// The port cannot change, so wait for whoever holds it to let go.
		if !errors.Is(err, errAddrInUse) || time.Now().After(deadline) {
			tb.Fatalf("testkit: restarting redis-server: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Do runs one command and returns its reply rendered by Reply.String, e.g.
// "OK", "42", "(nil)" or "[a b]". It fails the test on an error reply or a
// network error; use Command to inspect those instead. Each call uses a new
// connection, so connection state such as SELECT does not carry over.
func (s *Server) Do(tb testing.TB, args ...string) string {
	tb.Helper()
	r, err := s.Command(args...)
	if err != nil {
		tb.Fatalf("testkit: %s on %s: %v", strings.Join(args, " "), s.Addr(), err)
	}
	return r.String()
}

// Command runs one command and returns the parsed reply. An error reply is
// returned both as the Reply and as a RedisError.
func (s *Server) Command(args ...string) (Reply, error) {
	if len(args) == 0 {
		return Reply{}, errors.New("testkit: empty command")
	}
	if s.cfg.password != "" {
		return roundTrip(s.Addr(), []string{"AUTH", s.cfg.password}, args)
	}
	return roundTrip(s.Addr(), args)
}

// Log returns what the current (or last) redis-server process wrote to
// stdout and stderr.
func (s *Server) Log() string {
	p := s.current()
	if p == nil {
		return ""
	}
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.logPath, err)
	}
	return string(b)
}

func (s *Server) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// run execs redis-server on s.port and waits until it is ready. On failure
// the process is dead and the error carries the end of its log.
func (s *Server) run(deadline time.Time) error {
	p, err := s.spawn()
	if err != nil {
		return err
	}
	err = s.waitReady(p, deadline)
	if err == nil || errors.Is(err, errAddrInUse) {
		return err
	}
	s.mu.Lock()
	s.reported = p
	s.mu.Unlock()
	return fmt.Errorf("%w\n--- redis-server log (%s) ---\n%s", err, p.logPath, tail(s.Log(), logTailBytes))
}

// logReported tells cleanup not to print a log a failure message has shown.
func (s *Server) logReported() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc == s.reported
}

func (s *Server) spawn() (*process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts++
	logPath := filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.starts))
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// The child keeps its own descriptor; ours is not needed after Start.
	defer f.Close()
	// Not CommandContext: the process must outlive contexts that end early
	// and die only through Kill, Stop or Cleanup.
	cmd := exec.Command(s.bin, s.args()...)
	if len(s.cfg.prefix) > 0 {
		cmd = exec.Command(s.cfg.prefix[0], append(append(s.cfg.prefix[1:len(s.cfg.prefix):len(s.cfg.prefix)], s.bin), s.args()...)...)
	}
	cmd.Dir = s.dir
	// An *os.File, unlike a buffer, needs no copying goroutine, so Wait
	// cannot block on a pipe and a crash log survives on disk.
	cmd.Stdout, cmd.Stderr = f, f
	if err := startProcess(cmd); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.proc = p
	return p, nil
}

func (s *Server) args() []string {
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
	}
	if s.sock != "" {
		args = append(args, "--unixsocket", s.sock, "--unixsocketperm", "700")
	}
	if s.cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", s.nodesConf(),
			"--cluster-node-timeout", "2000",
		)
	}
	// Last, so that callers can override any of the above.
	return append(args, s.cfg.args...)
}

func (s *Server) nodesConf() string { return filepath.Join(s.dir, "nodes.conf") }

// waitReady polls until the server answers as process p. Checking the pid,
// not just PING, matters: if p lost the bind race, another test binary's
// redis may be answering on the very same port.
func (s *Server) waitReady(p *process, deadline time.Time) error {
	want := fmt.Sprintf("process_id:%d\r\n", p.cmd.Process.Pid)
	for {
		if p.exited() {
			if strings.Contains(s.Log(), "Address already in use") {
				return errAddrInUse
			}
			return fmt.Errorf("redis-server on %s exited before becoming ready: %v", s.Addr(), p.err)
		}
		if r, err := s.Command("INFO", "server"); err == nil && strings.Contains(r.Str, want) {
			return nil
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on %s not ready within %v", s.Addr(), startTimeout)
		}
		time.Sleep(pollInterval)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}
