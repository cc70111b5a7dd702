package testkit

import (
	"syscall"
	"testing"
)

// Pause stops the server's process (SIGSTOP): it keeps its connections
// and its port, and the kernel still accepts new connections on it, but
// nothing is answered until Resume. A hung server, as clients see one.
func (s *Server) Pause(tb testing.TB) { s.signal(tb, syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume(tb testing.TB) { s.signal(tb, syscall.SIGCONT) }

func (s *Server) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	p := s.current()
	if p == nil || p.exited() {
		tb.Fatalf("testkit: %v to redis-server %s, which is not running", sig, s.Addr())
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("testkit: %v to redis-server %s: %v", sig, s.Addr(), err)
	}
}
