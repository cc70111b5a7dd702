package testkit

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// totalSlots is fixed by the Redis Cluster specification.
	totalSlots = 16384
	// createTimeout bounds redis-cli --cluster create, which normally takes
	// about a second (it polls for the join once per second).
	createTimeout = 30 * time.Second
	// healthyTimeout leaves room for a restarted master: peers clear its
	// FAIL flag only after twice the 2s node timeout.
	healthyTimeout = 30 * time.Second
	// cliMinMasters is the smallest cluster redis-cli --cluster create
	// accepts; smaller ones are assembled by hand.
	cliMinMasters = 3
)

// Cluster is a Redis Cluster of masters without replicas, each a Server
// started with cluster mode on. Killing a node therefore makes its slots
// unavailable (and cluster_state fail once peers notice) until Restart
// brings it back, empty, with the same identity and slots.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts masters cluster-enabled servers, joins them into a
// cluster covering all 16384 slots and waits until every node reports it
// healthy. Options apply to every node; a password is passed on to
// redis-cli. Everything is killed in tb.Cleanup. The test is skipped when
// redis-server or redis-cli is not installed.
//
// Clusters of 3 or more masters are created with redis-cli --cluster create;
// redis-cli refuses fewer, so 1 or 2 masters are joined by hand with
// CLUSTER ADDSLOTS and CLUSTER MEET.
func StartCluster(tb testing.TB, masters int, opts ...Option) *Cluster {
	tb.Helper()
	if masters < 1 {
		tb.Fatalf("testkit: a cluster needs at least one master, got %d", masters)
	}
	if masters >= cliMinMasters {
		RequireBinaries(tb, serverBinary, cliBinary)
	} else {
		RequireBinaries(tb, serverBinary)
	}
	c := &Cluster{}
	for i := 0; i < masters; i++ {
		c.nodes = append(c.nodes, startServer(tb, true, opts))
	}
	if masters >= cliMinMasters {
		c.createWithCLI(tb)
	} else {
		c.createByHand(tb)
	}
	c.WaitHealthy(tb)
	return c
}

// Addrs returns the nodes' addresses, to be used as seeds by clients.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns the master servers, e.g. to Kill and Restart one of them.
func (c *Cluster) Nodes() []*Server {
	return append([]*Server(nil), c.nodes...)
}

func (c *Cluster) createWithCLI(tb testing.TB) {
	tb.Helper()
	cli, err := exec.LookPath(cliBinary)
	if err != nil {
		tb.Fatalf("testkit: %v", err)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if pw := c.nodes[0].cfg.password; pw != "" {
		args = append(args, "-a", pw, "--no-auth-warning")
	}
	// A plain timeout, not the test's context: redis-cli must not be cut
	// off by anything but a genuine hang. Its exit status 0 does not mean
	// ready: nodes stay cluster_state:fail until about 2s after they start
	// (Redis' CLUSTER_WRITABLE_DELAY), hence the WaitHealthy that follows.
	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("testkit: redis-cli %s: %v\n%s", strings.Join(args, " "), err, ansiColor.ReplaceAll(out, nil))
	}
}

// ansiColor matches the color codes redis-cli prints even into a pipe.
var ansiColor = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// createByHand does what redis-cli does for larger clusters: split the
// slots evenly, give each node a distinct config epoch so they need not
// resolve a collision, then introduce every node to the first.
func (c *Cluster) createByHand(tb testing.TB) {
	tb.Helper()
	n := len(c.nodes)
	for i, node := range c.nodes {
		addSlots := []string{"CLUSTER", "ADDSLOTS"}
		for slot := i * totalSlots / n; slot < (i+1)*totalSlots/n; slot++ {
			addSlots = append(addSlots, strconv.Itoa(slot))
		}
		node.Do(tb, addSlots...)
		node.Do(tb, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1))
	}
	for _, node := range c.nodes[1:] {
		c.nodes[0].Do(tb, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(node.Port()))
	}
}

// WaitHealthy waits until every node reports cluster_state:ok with all
// 16384 slots assigned and reachable, and knows every other node. Call it
// after restarting a node, before expecting the cluster to serve again.
func (c *Cluster) WaitHealthy(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(healthyTimeout)
	for {
		problems := c.problems()
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testkit: cluster not healthy after %v:\n%s", healthyTimeout, strings.Join(problems, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// problems lists, per node, why it does not consider the cluster healthy.
func (c *Cluster) problems() []string {
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": strconv.Itoa(totalSlots),
		"cluster_slots_ok":       strconv.Itoa(totalSlots),
		"cluster_known_nodes":    strconv.Itoa(len(c.nodes)),
	}
	var problems []string
	for _, node := range c.nodes {
		r, err := node.Command("CLUSTER", "INFO")
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", node.Addr(), err))
			continue
		}
		info := parseInfo(r.Str)
		for field, value := range want {
			if info[field] != value {
				problems = append(problems, fmt.Sprintf("%s: %s is %q, want %q", node.Addr(), field, info[field], value))
			}
		}
	}
	return problems
}

// parseInfo turns INFO-style "field:value\r\n" lines into a map.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// NodeForKey returns the master that owns key's hash slot (hash tags
// included), asking a live node so the answer matches what Redis would
// redirect to.
func (c *Cluster) NodeForKey(tb testing.TB, key string) *Server {
	tb.Helper()
	for _, asked := range c.nodes {
		if !asked.Running() {
			continue
		}
		slot, err := asked.Command("CLUSTER", "KEYSLOT", key)
		if err != nil {
			tb.Fatalf("testkit: CLUSTER KEYSLOT on %s: %v", asked.Addr(), err)
		}
		slots, err := asked.Command("CLUSTER", "SLOTS")
		if err != nil {
			tb.Fatalf("testkit: CLUSTER SLOTS on %s: %v", asked.Addr(), err)
		}
		port, ok := slotOwnerPort(slots, slot.Int)
		if !ok {
			tb.Fatalf("testkit: no node owns slot %d of key %q", slot.Int, key)
		}
		for _, n := range c.nodes {
			if n.Port() == port {
				return n
			}
		}
		tb.Fatalf("testkit: slot %d of key %q is owned by unknown port %d", slot.Int, key, port)
	}
	tb.Fatalf("testkit: no running node to ask for key %q", key)
	return nil
}

// slotOwnerPort reads a CLUSTER SLOTS reply, whose entries look like
// [start end [ip port id ...] replicas...], and returns the master's port.
func slotOwnerPort(slots Reply, slot int64) (int, bool) {
	for _, r := range slots.Elems {
		if len(r.Elems) < 3 || len(r.Elems[2].Elems) < 2 {
			continue
		}
		if r.Elems[0].Int <= slot && slot <= r.Elems[1].Int {
			return int(r.Elems[2].Elems[1].Int), true
		}
	}
	return 0, false
}
