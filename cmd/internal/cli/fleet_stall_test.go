package cli

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/internal/faults"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// The stalled fleet: three leased nodes, one fixed window limit, offered
// twice the limit with 80% of it on one node (the shape that made leased
// overshoot when a slow renewal counted as an outage).
const (
	stallRate    = 100 // R per stallPeriod
	stallPeriod  = time.Second
	stallWindows = 6 // measured, after one of warm-up
	// stallOutage is --outage-after: longer than the longest stall, so
	// that no stall is an outage and no window may pass R.
	stallOutage = 5 * time.Second
)

var stallBody = fmt.Sprintf(`{"key":"stall","limit":{"algorithm":"fixed_window","rate":%d,"period":%q}}`, stallRate, stallPeriod)

// TestLeasedFleetHoldsTheLimitWhileRedisStalls: three `floodgate serve
// --strategy leased` processes share one redis-server through a fault
// proxy, under twice the limit with an 80/20 skew, while Redis is stopped
// (SIGSTOP) again and again for 20 ms to 2 s and, in between, every reply
// is delayed past the store timeout. No stall lasts --outage-after, so the
// coordinator is slow, never down: no window may admit more than R. The
// default failure mode, fail_open, would show any stall taken for an
// outage as an overshoot.
func TestLeasedFleetHoldsTheLimitWhileRedisStalls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds floodgate and runs a fleet for about ten seconds; skipped with -short")
	}
	redis := testkit.StartServer(t)
	proxy := faults.StartProxy(t, redis.Addr())
	bin := buildFloodgate(t)
	var nodes []string
	for i := range 3 {
		args := []string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
			"--strategy", "leased", "--sync-interval", "100ms", "--outage-after", stallOutage.String(),
			"--nodes", "3", "--node-name", "stall" + strconv.Itoa(i),
			"--redis", proxy.Addr(), "--redis-prefix", "floodgate-stall:"}
		addr, _, _, err := startConfirmNode(t, bin, args)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, addr)
	}
	clock := readRedisClock(t, redis)
	first, last := clock.measuredWindows(time.Now())
	start, end := clock.localStart(first-1), clock.localStart(last+1)

	// The load: 2R per period, 80% of it on node 0.
	rates := []float64{1.6 * stallRate, 0.2 * stallRate, 0.2 * stallRate}
	ctx, cancel := context.WithDeadline(context.Background(), end.Add(10*time.Second))
	defer cancel()
	var ds []decision
	var driveErr error
	driven := make(chan struct{})
	go func() {
		defer close(driven)
		ds, driveErr = driveBody(ctx, nodes, rates, stallBody, start, end)
	}()

	// The faults, on the test's goroutine: stalls of every length up to 2 s,
	// each followed by a spell of replies delayed past the store timeout.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	stalls := []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond, 700 * time.Millisecond, 2 * time.Second}
	time.Sleep(time.Until(start.Add(stallPeriod)))
	var done []string
	for i := 0; time.Until(end) > 2*time.Second; i++ {
		stall := stalls[i%len(stalls)]
		at := time.Now()
		redis.Pause(t)
		time.Sleep(stall)
		redis.Resume(t)
		proxy.AddLatency(t, 80) // the store timeout is 50 ms
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		proxy.Heal()
		time.Sleep(time.Duration(50+rng.IntN(200)) * time.Millisecond)
		w := clock.window(at)
		done = append(done, fmt.Sprintf("%s at %d+%dms", stall, w-first, at.Sub(clock.localStart(w)).Milliseconds()))
	}
	<-driven
	if driveErr != nil {
		t.Fatalf("the load: %v", driveErr)
	}
	tally := clock.tally(ds, first, last, stallRate)
	t.Logf("stalls %v; %s", done, tally)
	t.Logf("decision times (HTTP, client side): %s", timing.Summarize(decisionTimes(ds)))
	if tally.failed > 0 {
		t.Errorf("%d requests got no decision; first: %v", tally.failed, tally.firstError)
	}
	for _, w := range tally.windows {
		// An admission whose request straddled a window edge may be the
		// neighbour's: only what is over R beyond those is overshoot.
		if w.admitted-w.ambiguous > stallRate {
			t.Errorf("window %d admitted %d (%d of them near an edge) > R = %d while Redis was only slow",
				w.index, w.admitted, w.ambiguous, stallRate)
		}
	}
	if tally.windowsFilled() == 0 {
		t.Errorf("no window reached the limit: the load never tested it (%s)", tally)
	}
	if len(done) < 3 {
		t.Errorf("only %d stalls ran: the fleet was hardly tested", len(done))
	}
}

// driveBody is drive with a body and an arrival rate (requests per
// second) per node.
func driveBody(ctx context.Context, nodes []string, rates []float64, body string, start, end time.Time) ([]decision, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	var (
		mu   sync.Mutex
		all  []decision
		sent sync.WaitGroup
	)
	record := func(d decision) { mu.Lock(); all = append(all, d); mu.Unlock() }
	var pacers sync.WaitGroup
	for i, addr := range nodes {
		gap := time.Duration(float64(time.Second) / rates[i])
		phase := gap * time.Duration(i) / time.Duration(len(nodes))
		pacers.Go(func() {
			for at := start.Add(phase); at.Before(end) && ctx.Err() == nil; at = at.Add(gap) {
				time.Sleep(time.Until(at))
				sent.Go(func() { record(askAllowBody(ctx, client, addr, body)) })
			}
		})
	}
	pacers.Wait()
	sent.Wait()
	return all, ctx.Err()
}

// decisionTimes lists how long each answered decision took.
func decisionTimes(ds []decision) []time.Duration {
	out := make([]time.Duration, 0, len(ds))
	for _, d := range ds {
		if d.err == nil {
			out = append(out, d.answered.Sub(d.sent))
		}
	}
	slices.Sort(out)
	return out
}
