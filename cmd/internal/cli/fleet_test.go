package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// sharedLimit is 6 a day, in windows of a day that clearOfWindowEdge keeps
// the tests inside.
const sharedLimit = `{"key":"tenant:acme","limit":{"algorithm":"fixed_window","rate":6,"period":"24h"}}`

// admitted sends n requests to a node and counts the 200s.
func admitted(t *testing.T, httpAddr string, n int) int {
	t.Helper()
	ok := 0
	for range n {
		if code, _ := allow(t, httpAddr, sharedLimit); code == 200 {
			ok++
		}
	}
	return ok
}

// With --strategy local each node of a fleet of --nodes enforces its
// share, in memory: 6 a day over two nodes is 3 on each.
func TestServeLocalSplitsTheLimit(t *testing.T) {
	a, _, _ := startServe(t, "--strategy", "local", "--nodes", "2", "--node-name", "a")
	b, _, _ := startServe(t, "--strategy", "local", "--nodes", "2", "--node-name", "b")
	clearOfWindowEdge(t, 24*time.Hour)
	if got := admitted(t, a, 5); got != 3 {
		t.Fatalf("node a admitted %d of 5, want its share 3", got)
	}
	if got := admitted(t, b, 5); got != 3 {
		t.Fatalf("node b admitted %d of 5, want its share 3", got)
	}
}

var clusterBind = regexp.MustCompile(`msg="cluster membership" node=\S+ bind=(\S+)`)

// startNode runs a serve that joins a memberlist cluster and returns its
// HTTP address and its cluster address.
func startNode(t *testing.T, name string, args ...string) (httpAddr, bind string) {
	t.Helper()
	httpAddr, _, logs := startServe(t, append([]string{"--node-name", name, "--cluster-bind", "127.0.0.1:0"}, args...)...)
	m := clusterBind.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no cluster address in the logs:\n%s", logs)
	}
	return httpAddr, m[1]
}

// With --strategy gossip the nodes share the limit without Redis: what
// one node admitted reaches the others through memberlist, and they deny.
func TestServeGossipSharesTheLimit(t *testing.T) {
	a, seed := startNode(t, "node-a", "--strategy", "gossip", "--sync-interval", "50ms")
	b, _ := startNode(t, "node-b", "--strategy", "gossip", "--sync-interval", "50ms", "--cluster-join", seed)
	c, _ := startNode(t, "node-c", "--strategy", "gossip", "--sync-interval", "50ms", "--cluster-join", seed)
	clearOfWindowEdge(t, 24*time.Hour)
	if got := admitted(t, a, 6); got != 6 {
		t.Fatalf("node a admitted %d of 6", got)
	}
	for _, node := range []string{b, c} {
		waitFor(t, func() bool {
			code, _ := allow(t, node, strings.Replace(sharedLimit, `"limit"`, `"cost":0,"limit"`, 1))
			return code == 429 || code == 200 && admitted(t, node, 0) == 0 && isFull(t, node)
		}, "node a's count to reach "+node)
	}
	if got := admitted(t, b, 3) + admitted(t, c, 3); got != 0 {
		t.Fatalf("nodes b and c admitted %d after the fleet reached the limit", got)
	}
}

// isFull reads a key without counting and reports whether none remains.
func isFull(t *testing.T, httpAddr string) bool {
	t.Helper()
	_, body := allow(t, httpAddr, strings.Replace(sharedLimit, `"limit"`, `"cost":0,"limit"`, 1))
	return body["remaining"] == float64(0)
}

// With --strategy synced the nodes count in memory and sync their totals
// through Redis every --sync-interval: a node learns what the others
// admitted within an interval or two.
func TestServeSyncedSharesTheLimitThroughRedis(t *testing.T) {
	srv := testkit.StartServer(t)
	a, _, _ := startServe(t, "--redis", srv.Addr(), "--strategy", "synced", "--sync-interval", "20ms")
	b, _, _ := startServe(t, "--redis", srv.Addr(), "--strategy", "synced", "--sync-interval", "20ms")
	clearOfWindowEdge(t, 24*time.Hour)
	if got := admitted(t, a, 6); got != 6 {
		t.Fatalf("node a admitted %d of 6", got)
	}
	waitFor(t, func() bool { return isFull(t, b) }, "node a's count to reach node b")
	if got := admitted(t, b, 3); got != 0 {
		t.Fatalf("node b admitted %d after the fleet reached the limit", got)
	}
}

// With --strategy leased the nodes take leases of the budget in Redis:
// whatever the nodes' order, the fleet never admits more than the limit.
func TestServeLeasedNeverOvershoots(t *testing.T) {
	srv := testkit.StartServer(t)
	// A store timeout only a hang reaches: under fail_open (the default) a
	// renewal slower than it would be admitted by the failure policy, not
	// the lease, however busy the machine.
	args := []string{"--redis", srv.Addr(), "--strategy", "leased", "--nodes", "2", "--sync-interval", "20ms", "--store-timeout", timing.Patience.String()}
	a, _, _ := startServe(t, args...)
	b, _, _ := startServe(t, args...)
	clearOfWindowEdge(t, 24*time.Hour)
	total := 0
	for range 4 {
		total += admitted(t, a, 3) + admitted(t, b, 3)
		time.Sleep(30 * time.Millisecond) // leases move between the nodes by demand
	}
	if total > 6 || total < 3 {
		t.Fatalf("the fleet admitted %d of 24 against a limit of 6", total)
	}
}

func TestServeRejectsBadFleetSettings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--strategy", "telepathy"}, `--strategy "telepathy"`},
		{[]string{"--strategy", "synced"}, "strategy synced keeps its shared state in Redis: give --redis"},
		{[]string{"--strategy", "gossip"}, "strategy gossip needs --cluster-bind"},
		{[]string{"--strategy", "local", "--nodes", "0"}, "--nodes 0"},
		{[]string{"--strategy", "local", "--cluster-bind", "localhost:1"}, "--cluster-bind localhost:1"},
	} {
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
		code := Main(ctx, append([]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"}, tc.args...), &out, &errOut)
		cancel()
		if code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error naming %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

// A limit names its own strategy in the policy, with its parameters; the
// others follow --strategy.
func TestServePolicyPicksTheStrategyPerLimit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	policy := `domain: api
descriptors:
  - key: split
    rate_limit: {unit: day, requests_per_unit: 6, strategy: local}
  - key: whole
    rate_limit: {unit: day, requests_per_unit: 6}
  - key: sampled
    rate_limit: {unit: day, requests_per_unit: 6, strategy: {name: sampled, one_in: 1}}
`
	if err := os.WriteFile(file, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testkit.StartServer(t)
	httpAddr, _, _ := startServe(t, "--config", file, "--nodes", "2", "--redis", srv.Addr())
	clearOfWindowEdge(t, 24*time.Hour)
	count := func(key string) int {
		ok := 0
		for range 8 {
			if code, _ := allow(t, httpAddr, `{"domain":"api","descriptors":[{"entries":[{"key":"`+key+`","value":"v"}]}]}`); code == 200 {
				ok++
			}
		}
		return ok
	}
	if got := count("split"); got != 3 {
		t.Errorf("the local limit admitted %d of 8 on one of two nodes, want its share 3", got)
	}
	if got := count("whole"); got != 6 {
		t.Errorf("the exact limit admitted %d of 8, want 6", got)
	}
	if got := count("sampled"); got != 6 {
		t.Errorf("the sampled limit (p = 1: every admission counted) admitted %d of 8, want 6", got)
	}
}
