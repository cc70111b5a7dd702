package testkit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Sentinel is one redis-sentinel process (redis-server --sentinel) on
// 127.0.0.1 that watches one master set.
type Sentinel struct {
	// Addr is the Sentinel's "127.0.0.1:PORT".
	Addr string
	// Set is the name of the master set it watches.
	Set string
	log string
}

// StartSentinel runs a Sentinel that watches the master at addr as the
// master set named set (quorum 1: this one Sentinel decides a failover),
// authenticating to it with password ("" for none). It returns once the
// Sentinel names the master, and kills it in tb.Cleanup. Failovers are
// quick: the master is judged down after a second without an answer.
func StartSentinel(tb testing.TB, set, addr, password string) *Sentinel {
	tb.Helper()
	RequireBinaries(tb, serverBinary)
	dir := tb.TempDir()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatalf("testkit: master address %q: %v", addr, err)
	}
	sport, err := freePort(false)
	if err != nil {
		tb.Fatalf("testkit: %v", err)
	}
	tb.Cleanup(func() { release(sport, false) })
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 1\n"+
		"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 10000\n",
		sport, dir, set, host, port, set, set)
	if password != "" {
		conf += fmt.Sprintf("sentinel auth-pass %s %s\n", set, password)
	}
	path := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		tb.Fatalf("testkit: %v", err)
	}
	s := &Sentinel{Addr: "127.0.0.1:" + strconv.Itoa(sport), Set: set, log: filepath.Join(dir, "sentinel.log")}
	log, err := os.Create(s.log)
	if err != nil {
		tb.Fatalf("testkit: %v", err)
	}
	defer log.Close()
	cmd := exec.Command(serverBinary, path, "--sentinel")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		tb.Fatalf("testkit: starting redis-sentinel: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("testkit: log of redis-sentinel %s:\n%s", s.Addr, s.Log())
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	s.WaitFor(tb, "it names the master", func() bool {
		_, err := s.Master()
		return err == nil
	})
	return s
}

// Master is the address of the master the Sentinel names now.
func (s *Sentinel) Master() (string, error) {
	r, err := Send(s.Addr, "SENTINEL", "get-master-addr-by-name", s.Set)
	if err != nil {
		return "", err
	}
	if len(r.Elems) != 2 {
		return "", fmt.Errorf("SENTINEL get-master-addr-by-name %s = %s", s.Set, r)
	}
	return net.JoinHostPort(r.Elems[0].Str, r.Elems[1].Str), nil
}

// WaitFor polls cond until it holds, failing the test after startTimeout
// with what it was waiting for and the Sentinel's log.
func (s *Sentinel) WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(startTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("testkit: redis-sentinel %s: not the case within %s that %s", s.Addr, startTimeout, what)
		}
		time.Sleep(pollInterval)
	}
}

// Log is what the Sentinel has written to its log.
func (s *Sentinel) Log() string {
	b, _ := os.ReadFile(s.log)
	return tail(string(b), logTailBytes)
}

// Command sends one command to the Sentinel (SENTINEL FAILOVER, SENTINEL
// REPLICAS …) and returns its parsed reply.
func (s *Sentinel) Command(args ...string) (Reply, error) { return Send(s.Addr, args...) }
