package cli

// This file confirms `floodgate sim tune`'s answer on a real fleet: N
// `floodgate serve` processes sharing one redis-server, driven at a known
// rate over HTTP. The simulator (package sim) confirms the same answer in
// virtual time; here the network, the scheduler and the Redis clock are
// real, which is the point. The test is slow, so it runs only when
// FLOODGATE_CLUSTER_CONFIRM=1.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/cmd/internal/sim/bounds"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// The fleet under test. Small enough for two cores: 3 nodes at 200
// requests/s each is 600 HTTP requests/s, twice the 300/s limit, so every
// window fills and overshoot has its chance.
const (
	clusterConfirmEnv = "FLOODGATE_CLUSTER_CONFIRM"
	confirmNodes      = 3
	confirmRate       = 300                  // units per confirmPeriod, the shared limit R
	confirmPeriod     = time.Second          // the limit's window
	confirmArrival    = 200.0                // λ: requests per second sent to each node
	confirmTolerance  = 0.10                 // 30 units over R per window
	confirmDelay      = 2 * time.Millisecond // D given to the bounds: loopback round trips are far below it
	confirmWindows    = 6                    // windows measured per strategy, after one of warm-up
	confirmDeadline   = 100 * time.Second
)

// servingLine is serve's startup log line, with its listen addresses;
// membershipLine the one with its memberlist address, for --cluster-join.
var (
	servingLine    = regexp.MustCompile(`floodgate serving"? http=(\S+) grpc=(\S+)`)
	membershipLine = regexp.MustCompile(`cluster membership"? node=\S+ bind=(\S+)`)
)

// TestClusterConfirmsSimTune tunes T for synced, leased and gossip with the bounds
// of `floodgate sim tune`, runs a real fleet at each answer, and checks
// that no window of the fleet admitted more than the tolerance (and the
// stated bound) over the limit.
func TestClusterConfirmsSimTune(t *testing.T) {
	if os.Getenv(clusterConfirmEnv) != "1" {
		t.Skipf("slow: starts %d floodgate processes; set %s=1 to run", confirmNodes, clusterConfirmEnv)
	}
	redis := testkit.StartServer(t)
	run := &clusterConfirm{t: t, bin: buildFloodgate(t), redis: redis, clock: readRedisClock(t, redis), results: map[string]windowTally{}}
	p := confirmParams()
	ctx, cancel := context.WithTimeout(context.Background(), confirmDeadline)
	defer cancel()
	rows, err := bounds.Tune(ctx, []string{bounds.Synced, bounds.Leased, bounds.Gossip}, p, confirmTolerance, 1, run.confirm)
	if err != nil {
		t.Fatalf("tune with the cluster's confirmation: %v", err)
	}
	var table strings.Builder
	report := simTuneReport{Params: p, Tolerance: confirmTolerance, Keys: 1, Arrival: "200/s per node (2x the limit), paced at fixed intervals", Rows: rows}
	if err := report.writeText(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("measured on %d floodgate processes and one redis-server:\n%s", confirmNodes, table.String())
	for _, row := range rows {
		run.check(row)
	}
}

// TestClusterConfirmsGossipBound runs a real gossip fleet (memberlist on
// loopback, no Redis) and checks its overshoot against the bound gossip
// states, (N−1)·λ·(rounds·T + D): serve sets memberlist's gossip interval to
// --sync-interval T, and a count reaches the other nodes after that many
// rounds of broadcasts plus the network delay D.
func TestClusterConfirmsGossipBound(t *testing.T) {
	if os.Getenv(clusterConfirmEnv) != "1" {
		t.Skipf("slow: starts %d floodgate processes; set %s=1 to run", confirmNodes, clusterConfirmEnv)
	}
	run := &clusterConfirm{t: t, bin: buildFloodgate(t), results: map[string]windowTally{}}
	p := confirmParams()
	p.Interval = 100 * time.Millisecond // serve's default --sync-interval
	bound, err := bounds.Overshoot(bounds.Gossip, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), confirmDeadline)
	defer cancel()
	m, err := run.confirm(ctx, bounds.Gossip, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gossip, %d nodes at %.0f/s each, limit %d/%s, T = %s: worst overshoot %.0f units; bound %.1f; tolerance %.0f",
		confirmNodes, confirmArrival, confirmRate, confirmPeriod, p.Interval, m.Overshoot, bound, confirmTolerance*confirmRate)
	run.checkWindows(bounds.Gossip, p.Interval.String(), bound)
}

// confirmParams describe the fleet under test to package bounds.
func confirmParams() bounds.Params {
	return bounds.Params{
		Nodes:       confirmNodes,
		Limit:       floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: confirmRate, Period: confirmPeriod},
		ArrivalRate: confirmArrival,
		Delay:       confirmDelay,
		Z:           bounds.DefaultZ,
		Poisson:     0.999, // tune's default: the bounds read Poisson arrivals at this quantile
		OneIn:       1,
	}
}

// clusterConfirm is a bounds.Confirm that runs the fleet for real.
type clusterConfirm struct {
	t       *testing.T
	bin     string
	redis   *testkit.Server
	clock   redisClock
	results map[string]windowTally // by strategy, for check
}

// confirm starts the fleet with the strategy at q.Interval, drives it for
// confirmWindows windows and returns the worst window it saw.
func (c *clusterConfirm) confirm(ctx context.Context, strategy string, q bounds.Params) (bounds.Measurement, error) {
	nodes, stop, err := c.startFleet(strategy, q.Interval)
	defer stop() // the next strategy's fleet runs alone
	if err != nil {
		return bounds.Measurement{}, err
	}
	clock := c.clock
	if strategy == bounds.Gossip {
		clock = redisClock{} // gossip numbers windows on each node's clock: this machine's
	}
	before, err := redisScriptCalls(c.redis)
	if err != nil {
		return bounds.Measurement{}, err
	}
	first, last := clock.measuredWindows(time.Now())
	results, err := drive(ctx, nodes, clock.localStart(first-1), clock.localStart(last+1))
	if err != nil {
		return bounds.Measurement{}, err
	}
	after, err := redisScriptCalls(c.redis)
	if err != nil {
		return bounds.Measurement{}, err
	}
	tally := clock.tally(results, first, last, confirmRate)
	c.results[strategy] = tally
	c.t.Logf("%s at T=%s: %s", strategy, q.Interval, tally)
	elapsed := clock.localStart(last + 1).Sub(clock.localStart(first - 1)).Seconds()
	return bounds.Measurement{
		Overshoot:           float64(tally.worstOvershoot()),
		StoreCallsPerSecond: float64(after-before) / elapsed,
	}, nil
}

// check fails the test when a window admitted more than the bound and the
// tolerance allow, beyond what the measurement cannot attribute.
//
// The margin: a decision happens somewhere between the send and the reply,
// and the Redis clock is known to within half the round trip of the TIME
// that read it. An admission whose interval, so widened, crosses a window
// edge may belong to the neighbouring window; the window's ambiguous count
// is subtracted before comparing. What remains was certainly admitted in
// that window, so a failure here is a real overshoot, not timing noise.
func (c *clusterConfirm) check(row bounds.TuneRow) {
	c.t.Helper()
	if _, ok := c.results[row.Strategy]; !ok {
		c.t.Errorf("%s: not measured (%s)", row.Strategy, row.ConfirmError)
		return
	}
	c.checkWindows(row.Strategy, row.IntervalText, math.Min(row.Tolerance, row.Overshoot))
}

// checkWindows fails the test for every window that certainly admitted
// more than limit over the rate (see check for the margin).
func (c *clusterConfirm) checkWindows(strategy, interval string, limit float64) {
	c.t.Helper()
	tally := c.results[strategy]
	if tally.failed > 0 {
		c.t.Errorf("%s: %d requests got no decision (first: %v)", strategy, tally.failed, tally.firstError)
	}
	for _, w := range tally.windows {
		if certain := w.admitted - w.ambiguous - confirmRate; float64(certain) > limit {
			c.t.Errorf("%s at T=%s: window %d admitted %d (%d of them near an edge), %d certainly over %d, above %.1f",
				strategy, interval, w.index, w.admitted, w.ambiguous, certain, confirmRate, limit)
		}
	}
	if tally.windowsFilled() == 0 {
		c.t.Errorf("%s: no window reached the limit: the load never tested the bound (%s)", strategy, tally)
	}
}

// startFleet starts confirmNodes serve processes with the strategy and
// returns their HTTP addresses and a stop that kills them all (t.Cleanup
// does too). Gossip nodes join the first one's memberlist; the others
// share the Redis.
func (c *clusterConfirm) startFleet(strategy string, interval time.Duration) (nodes []string, stopAll func(), err error) {
	var stops []func()
	stopAll = func() {
		for _, stop := range stops {
			stop()
		}
	}
	seed := ""
	for i := range confirmNodes {
		args := nodeArgs(c.redis, strategy, interval, i)
		if strategy == bounds.Gossip {
			args = append(args, "--cluster-bind", "127.0.0.1:0")
			if seed != "" {
				args = append(args, "--cluster-join", seed)
			}
		}
		addr, startup, stop, err := startConfirmNode(c.t, c.bin, args)
		if err != nil {
			return nil, stopAll, err
		}
		stops = append(stops, stop)
		nodes = append(nodes, addr)
		if strategy == bounds.Gossip && seed == "" {
			m := membershipLine.FindStringSubmatch(startup)
			if m == nil {
				return nil, stopAll, fmt.Errorf("gossip node %d logged no cluster address:\n%s", i, startup)
			}
			seed = m[1]
		}
	}
	return nodes, stopAll, nil
}

// nodeArgs are the serve flags of node i of the fleet. Each strategy gets
// its own key prefix so that one run's counts do not leak into the next.
func nodeArgs(redis *testkit.Server, strategy string, interval time.Duration, i int) []string {
	args := []string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
		"--strategy", strategy, "--sync-interval", interval.String(),
		"--nodes", strconv.Itoa(confirmNodes), "--node-name", "node" + strconv.Itoa(i)}
	if redis == nil {
		return args
	}
	return append(args, "--redis", redis.Addr(), "--redis-prefix", "floodgate-confirm-"+strategy+":")
}

// buildFloodgate builds the command once, from the root of its module
// (cmd/), into the test's temporary directory.
func buildFloodgate(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(t.TempDir(), "floodgate")
	build := exec.Command("go", "build", "-o", bin, "./floodgate")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./floodgate (in cmd/): %v\n%s", err, out)
	}
	return bin
}

// startConfirmNode runs one `floodgate serve` process and returns its HTTP
// address once it logs that it serves, and a stop that kills it and reaps
// it (also run in t.Cleanup, so a failing test leaks nothing).
func startConfirmNode(t *testing.T, bin string, args []string) (httpAddr, startupLog string, stop func(), err error) {
	var logs servicetest.SyncBuffer
	cmd := exec.Command(bin, args...)
	cmd.Env = withoutFloodgateEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return "", "", nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() || os.Getenv("FLOODGATE_NODE_LOGS") != "" {
			t.Logf("log of floodgate %s:\n%s", strings.Join(args, " "), tail(logs.String(), 400))
		}
	})
	deadline := time.After(10 * time.Second)
	for {
		if m := servingLine.FindStringSubmatch(logs.String()); m != nil {
			return m[1], logs.String(), stop, nil
		}
		select {
		case <-exited:
			return "", "", nil, fmt.Errorf("floodgate %s exited before serving:\n%s", strings.Join(args, " "), logs.String())
		case <-deadline:
			stop()
			return "", "", nil, fmt.Errorf("floodgate %s did not log that it serves within 10s:\n%s", strings.Join(args, " "), logs.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// withoutFloodgateEnv drops FLOODGATE_ variables: serve reads its flags from
// them, and the node must run with exactly the flags the test gives.
func withoutFloodgateEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "FLOODGATE_") {
			out = append(out, kv)
		}
	}
	return out
}

// redisScriptCalls counts the script calls Redis has served (EVALSHA,
// EVAL): every call of the synced and leased strategies to the store is
// one, while total_commands_processed would also count the commands the
// scripts run inside.
func redisScriptCalls(redis *testkit.Server) (int64, error) {
	if redis == nil {
		return 0, nil // gossip: no store
	}
	info, err := redis.Command("INFO", "commandstats")
	if err != nil {
		return 0, fmt.Errorf("INFO commandstats: %w", err)
	}
	var calls int64
	for _, line := range strings.Split(info.Str, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		field, _, _ := strings.Cut(stats, ",") // calls=N
		n, err := strconv.ParseInt(strings.TrimPrefix(field, "calls="), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO commandstats %s: %q: %w", name, stats, err)
		}
		calls += n
	}
	return calls, nil
}

// decision is one request of the load: when it was sent, when its answer
// came, and the answer.
type decision struct {
	sent, answered time.Time
	allowed        bool
	err            error
}

// drive sends confirmArrival requests per second to every node from start
// until end, open loop: each at its scheduled time, whether or not the
// ones before it were answered, so a slow node does not slow its load.
func drive(ctx context.Context, nodes []string, start, end time.Time) ([]decision, error) {
	rates := make([]float64, len(nodes))
	for i := range rates {
		rates[i] = confirmArrival
	}
	return driveBody(ctx, nodes, rates, confirmBody, start, end)
}

// confirmBody is the request: one key under an explicit fixed window limit.
var confirmBody = fmt.Sprintf(`{"key":"confirm","limit":{"algorithm":"fixed_window","rate":%d,"period":%q}}`, confirmRate, confirmPeriod)

// askAllowBody posts one decision request and reads the answer.
func askAllowBody(ctx context.Context, client *http.Client, addr, body string) decision {
	d := decision{sent: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/allow", strings.NewReader(body))
	if err != nil {
		d.err, d.answered = err, time.Now()
		return d
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		d.err, d.answered = err, time.Now()
		return d
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	d.answered = time.Now()
	var out struct {
		Allowed *bool `json:"allowed"`
	}
	switch {
	case err != nil:
		d.err = err
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests:
		d.err = fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(answer))
	case json.Unmarshal(answer, &out) != nil || out.Allowed == nil:
		d.err = fmt.Errorf("status %d, no allowed field: %s", resp.StatusCode, bytes.TrimSpace(answer))
	default:
		d.allowed = *out.Allowed
	}
	return d
}

// redisClock maps this machine's clock to Redis TIME, on which the synced
// and leased strategies number their windows.
type redisClock struct {
	offset time.Duration // Redis TIME − local clock
	err    time.Duration // how far offset may be off: half the best TIME round trip
}

// readRedisClock asks TIME a few times and keeps the sample with the
// shortest round trip: its midpoint is the best estimate of when Redis
// read its clock.
func readRedisClock(t *testing.T, redis *testkit.Server) redisClock {
	t.Helper()
	best := redisClock{err: time.Hour}
	for range 5 {
		before := time.Now()
		reply, err := redis.Command("TIME")
		after := time.Now()
		if err != nil || len(reply.Elems) != 2 {
			t.Fatalf("TIME: %v %v", reply, err)
		}
		sec, err1 := strconv.ParseInt(reply.Elems[0].Str, 10, 64)
		usec, err2 := strconv.ParseInt(reply.Elems[1].Str, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("TIME answered %v: want seconds and microseconds", reply)
		}
		half := after.Sub(before) / 2
		if half < best.err {
			mid := before.Add(half)
			best = redisClock{offset: time.UnixMicro(sec*1e6 + usec).Sub(mid), err: half}
		}
	}
	t.Logf("Redis TIME − local clock = %s ± %s", best.offset, best.err)
	return best
}

// window numbers a local instant by the Redis window it falls in.
func (c redisClock) window(local time.Time) int64 {
	return local.Add(c.offset).UnixMicro() / confirmPeriod.Microseconds()
}

// localStart is when window w starts, on the local clock.
func (c redisClock) localStart(w int64) time.Time {
	return time.UnixMicro(w * confirmPeriod.Microseconds()).Add(-c.offset)
}

// measuredWindows are the windows to count when the load starts at the
// next window edge after now: the first window warms the fleet up (a
// synced node follows its own clock until its first sync reply) and is
// not counted.
func (c redisClock) measuredWindows(now time.Time) (first, last int64) {
	first = c.window(now) + 2
	return first, first + confirmWindows - 1
}

// windowCount is what the fleet admitted in one window.
type windowCount struct {
	index            int64
	admitted, denied int
	ambiguous        int // admitted near an edge: maybe the neighbour's
}

// windowTally is the measurement of one run under a limit per window.
type windowTally struct {
	limit      int
	windows    []windowCount
	failed     int
	firstError error
}

// tally counts the admissions of windows first..last. A decision is placed
// at the midpoint of its send and answer; it is ambiguous when its
// interval, widened by the clock's error, crosses a window edge.
func (c redisClock) tally(ds []decision, first, last int64, limit int) windowTally {
	out := windowTally{limit: limit}
	for w := first; w <= last; w++ {
		out.windows = append(out.windows, windowCount{index: w})
	}
	for _, d := range ds {
		if d.err != nil {
			out.failed++
			if out.firstError == nil {
				out.firstError = d.err
			}
			continue
		}
		w := c.window(d.sent.Add(d.answered.Sub(d.sent) / 2))
		if w < first || w > last {
			continue
		}
		count := &out.windows[w-first]
		if !d.allowed {
			count.denied++
			continue
		}
		count.admitted++
		if c.window(d.sent.Add(-c.err)) != c.window(d.answered.Add(c.err)) {
			count.ambiguous++
		}
	}
	return out
}

// worstOvershoot is the most any window admitted over the limit.
func (t windowTally) worstOvershoot() int {
	worst := 0
	for _, w := range t.windows {
		worst = max(worst, w.admitted-t.limit)
	}
	return worst
}

// windowsFilled counts the windows that denied something: only those
// reached the limit, where overshoot can show.
func (t windowTally) windowsFilled() int {
	n := 0
	for _, w := range t.windows {
		if w.denied > 0 {
			n++
		}
	}
	return n
}

func (t windowTally) String() string {
	parts := make([]string, 0, len(t.windows))
	for _, w := range t.windows {
		parts = append(parts, fmt.Sprintf("%d(+%d edge)/%d denied", w.admitted, w.ambiguous, w.denied))
	}
	return fmt.Sprintf("admitted per window %s; worst overshoot %d; %d requests without a decision",
		strings.Join(parts, ", "), t.worstOvershoot(), t.failed)
}
