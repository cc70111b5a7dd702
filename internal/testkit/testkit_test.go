package testkit

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestServerCommands(t *testing.T) {
	t.Parallel()
	s := StartServer(t)

	if host, _, err := net.SplitHostPort(s.Addr()); err != nil || host != "127.0.0.1" {
		t.Fatalf("Addr() = %q, want 127.0.0.1:PORT", s.Addr())
	}
	// Steps share one server, so order matters: later ones see earlier writes.
	steps := []struct {
		cmd  []string
		want string
	}{
		{[]string{"PING"}, "PONG"},
		{[]string{"SET", "k", "v w"}, "OK"},
		{[]string{"GET", "k"}, "v w"},
		{[]string{"GET", "missing"}, "(nil)"},
		{[]string{"SET", "empty", ""}, "OK"},
		{[]string{"GET", "empty"}, ""},
		{[]string{"SET", "crlf", "a\r\nb"}, "OK"},
		{[]string{"GET", "crlf"}, "a\r\nb"},
		{[]string{"INCRBY", "n", "-7"}, "-7"},
		{[]string{"RPUSH", "l", "a", "b"}, "2"},
		{[]string{"LRANGE", "l", "0", "-1"}, "[a b]"},
		{[]string{"LRANGE", "missing", "0", "-1"}, "[]"},
		{[]string{"EXPIRE", "k", "100"}, "1"},
		{[]string{"PERSIST", "k"}, "1"},
		{[]string{"TTL", "k"}, "-1"},
		{[]string{"DBSIZE"}, "5"},
		{[]string{"FLUSHALL"}, "OK"},
		{[]string{"DBSIZE"}, "0"},
	}
	for _, st := range steps {
		if got := s.Do(t, st.cmd...); got != st.want {
			t.Errorf("%s = %q, want %q", strings.Join(st.cmd, " "), got, st.want)
		}
	}
}

func TestServerErrorReply(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	s.Do(t, "SET", "k", "not a number")

	r, err := s.Command("INCR", "k")
	var redisErr RedisError
	if !errors.As(err, &redisErr) || !strings.HasPrefix(string(redisErr), "ERR ") {
		t.Fatalf("INCR on a string: err = %v, want an ERR RedisError", err)
	}
	if r.Kind != Error {
		t.Errorf("reply kind = %v, want Error", r.Kind)
	}
}

func TestServerDownAndRestart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		down func(*Server)
	}{
		{"kill", (*Server).Kill},
		{"stop", (*Server).Stop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := StartServer(t)
			addr := s.Addr()
			s.Do(t, "SET", "k", "v")

			tt.down(s)
			if s.Running() {
				t.Fatal("Running() = true after going down")
			}
			if _, err := s.Command("PING"); err == nil {
				t.Fatal("PING succeeded on a server that is down")
			}
			tt.down(s) // must be a harmless no-op

			s.Restart(t)
			if s.Addr() != addr {
				t.Fatalf("Addr() = %s after Restart, want %s", s.Addr(), addr)
			}
			// No persistence: the restarted server must start empty.
			if got := s.Do(t, "DBSIZE"); got != "0" {
				t.Errorf("DBSIZE after restart = %s, want 0", got)
			}
		})
	}
}

// A killed server's port may be grabbed by someone else before Restart;
// Restart must wait for it rather than fail at once or move elsewhere.
func TestRestartWaitsForBusyPort(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	s.Kill()
	l, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatalf("occupying %s: %v", s.Addr(), err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(300 * time.Millisecond)
		l.Close()
	}()

	s.Restart(t)
	<-released
	if got := s.Do(t, "PING"); got != "PONG" {
		t.Fatalf("PING after Restart = %q, want PONG", got)
	}
}

func TestServerPassword(t *testing.T) {
	t.Parallel()
	s := StartServer(t, WithArgs("--requirepass", "secret"))

	if got := s.Do(t, "SET", "k", "v"); got != "OK" {
		t.Fatalf("SET with password = %q, want OK", got)
	}
	// Proves the password is really enforced, not just accepted.
	_, err := roundTrip(s.Addr(), []string{"GET", "k"})
	if err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("GET without AUTH: err = %v, want NOAUTH", err)
	}
}

func TestServersInParallel(t *testing.T) {
	t.Parallel()
	for i := range 4 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			s := StartServer(t)
			s.Do(t, "SET", "id", strconv.Itoa(i))
			if got := s.Do(t, "GET", "id"); got != strconv.Itoa(i) {
				t.Errorf("GET id = %q, want %d: servers share state", got, i)
			}
		})
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		masters int
	}{
		{"redis-cli", 3},
		{"by-hand", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := StartCluster(t, tt.masters)

			if got := len(c.Addrs()); got != tt.masters {
				t.Fatalf("len(Addrs()) = %d, want %d", got, tt.masters)
			}
			checkSlotsCovered(t, c)
			checkKeyRouting(t, c, "{a}x")
		})
	}
}

// checkSlotsCovered asserts that CLUSTER SLOTS, as seen by every node, splits
// all 16384 slots exactly among the cluster's own nodes.
func checkSlotsCovered(t *testing.T, c *Cluster) {
	t.Helper()
	want := nodePorts(c)
	for _, n := range c.Nodes() {
		slots, err := n.Command("CLUSTER", "SLOTS")
		if err != nil {
			t.Fatalf("CLUSTER SLOTS on %s: %v", n.Addr(), err)
		}
		covered := int64(0)
		owners := map[int]bool{}
		for _, r := range slots.Elems {
			covered += r.Elems[1].Int - r.Elems[0].Int + 1
			owners[int(r.Elems[2].Elems[1].Int)] = true
		}
		if covered != totalSlots {
			t.Errorf("%s: CLUSTER SLOTS covers %d slots, want %d", n.Addr(), covered, totalSlots)
		}
		if got := sortedKeys(owners); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: slot owners %v, want %v", n.Addr(), got, want)
		}
	}
}

// checkKeyRouting asserts the owner of key accepts it and any other node
// redirects, which is what a cluster client relies on.
func checkKeyRouting(t *testing.T, c *Cluster, key string) {
	t.Helper()
	owner := c.NodeForKey(t, key)
	if got := owner.Do(t, "SET", key, "v"); got != "OK" {
		t.Fatalf("SET %s on owner %s = %q, want OK", key, owner.Addr(), got)
	}
	for _, n := range c.Nodes() {
		if n == owner {
			continue
		}
		_, err := n.Command("GET", key)
		if err == nil || !strings.HasPrefix(err.Error(), "MOVED ") || !strings.HasSuffix(err.Error(), owner.Addr()) {
			t.Errorf("GET %s on %s: err = %v, want MOVED to %s", key, n.Addr(), err, owner.Addr())
		}
	}
}

func TestClusterNodeKillAndRestart(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 3)
	const key = "{b}counter"
	owner := c.NodeForKey(t, key)
	owner.Do(t, "SET", key, "1")

	owner.Kill()
	owner.Restart(t)
	c.WaitHealthy(t)

	// Same node, same slots, but the data died with the process.
	if got := c.NodeForKey(t, key); got != owner {
		t.Fatalf("after restart %s owns %s, want %s", got.Addr(), key, owner.Addr())
	}
	if got := owner.Do(t, "GET", key); got != "(nil)" {
		t.Errorf("GET %s after restart = %q, want (nil)", key, got)
	}
}

func nodePorts(c *Cluster) []int {
	ports := map[int]bool{}
	for _, n := range c.Nodes() {
		ports[n.Port()] = true
	}
	return sortedKeys(ports)
}

func sortedKeys(m map[int]bool) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}
