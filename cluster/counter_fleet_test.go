package cluster_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
)

// This file drives N in-process nodes of a counter strategy (synced,
// sampled) on one ManualClock with a deterministic arrival pattern, and
// measures what the fleet admits per window.

// counterPattern says how many unit requests reach a node in a step.
type counterPattern struct {
	name string
	// perStep returns the arrivals at node i (of n) in step s (of steps),
	// given the total arrivals per step across the fleet.
	perStep func(s, steps, i, n int, total int64) int64
}

// counterPatterns: every node alike; one node taking 80% of the traffic;
// and the demand shifting from the first node to the last halfway.
var counterPatterns = []counterPattern{
	{"uniform", func(_, _, i, n int, total int64) int64 { return counterShare(total, i, n) }},
	{"skewed", func(_, _, i, n int, total int64) int64 { return counterHot(total, i, n, 0) }},
	{"shift", func(s, steps, i, n int, total int64) int64 {
		hot := 0
		if s >= steps/2 {
			hot = n - 1
		}
		return counterHot(total, i, n, hot)
	}},
}

// counterShare splits total evenly, the remainder to the first nodes.
func counterShare(total int64, i, n int) int64 {
	share := total / int64(n)
	if int64(i) < total%int64(n) {
		share++
	}
	return share
}

// counterHot gives node hot 80% of total and splits the rest evenly.
func counterHot(total int64, i, n, hot int) int64 {
	if n == 1 {
		return total
	}
	hotShare := total * 8 / 10
	if i == hot {
		return hotShare
	}
	rest := total - hotShare
	j := i
	if i > hot {
		j--
	}
	return counterShare(rest, j, n-1)
}

// counterFleet is N nodes of one strategy over one shared Counter.
type counterFleet struct {
	clock *floodgate.ManualClock
	nodes []floodgate.Limiter
	// sync runs one round on node i; nil for a strategy without rounds.
	sync func(ctx context.Context, i int) error
}

// counterRun is one deterministic run: steps of length step, a round on
// every node (in order) every `every` steps, before that step's arrivals.
type counterRun struct {
	limit   floodgate.Limit
	step    time.Duration
	every   int
	steps   int
	perStep int64 // arrivals per step across the fleet
	pattern counterPattern
}

// counterWindow is what the fleet did in one window.
type counterWindow struct {
	arrived, admitted, denied int64
	lastNode                  int     // the node of the window's last admission
	arrivedAt                 []int64 // per node
}

// counterResult is a run's measurements.
type counterResult struct {
	windows   map[int64]*counterWindow
	maxStep   []int64 // per node, the most arrivals in one step
	decisions int64
}

// play runs the fleet. Within a step the nodes take turns, one request
// each, so that no node is favoured by the order.
func (f *counterFleet) play(t *testing.T, key string, r counterRun) counterResult {
	t.Helper()
	ctx := context.Background()
	n := len(f.nodes)
	res := counterResult{windows: map[int64]*counterWindow{}, maxStep: make([]int64, n)}
	period := r.limit.Period.Microseconds()
	left := make([]int64, n)
	for s := range r.steps {
		if f.sync != nil && r.every > 0 && s%r.every == 0 {
			for i := range f.nodes {
				if err := f.sync(ctx, i); err != nil {
					t.Fatalf("step %d: round on node %d: %v", s, i, err)
				}
			}
		}
		for i := range left {
			left[i] = r.pattern.perStep(s, r.steps, i, n, r.perStep)
			res.maxStep[i] = max(res.maxStep[i], left[i])
		}
		w := f.clock.Now().UnixMicro() / period
		win := res.windows[w]
		if win == nil {
			win = &counterWindow{arrivedAt: make([]int64, n)}
			res.windows[w] = win
		}
		counterTakeTurns(left, func(i int) {
			d, err := f.nodes[i].AllowN(ctx, key, r.limit, 1)
			if err != nil {
				t.Fatalf("step %d node %d: %v", s, i, err)
			}
			res.decisions++
			win.arrived++
			win.arrivedAt[i]++
			if d.Allowed {
				win.admitted++
				win.lastNode = i
			} else {
				win.denied++
			}
		})
		f.clock.Advance(r.step)
	}
	return res
}

// counterTakeTurns sends the requests left[i] of each node i, one per node
// in turn, so that no node is favoured by the order.
func counterTakeTurns(left []int64, send func(i int)) {
	for more := true; more; {
		more = false
		for i := range left {
			if left[i] > 0 {
				left[i]--
				more = true
				send(i)
			}
		}
	}
}

// counterSameWindows reports whether two runs admitted and denied the same
// in every window.
func counterSameWindows(a, b counterResult) bool {
	if len(a.windows) != len(b.windows) {
		return false
	}
	for w, x := range a.windows {
		y := b.windows[w]
		if y == nil || x.admitted != y.admitted || x.denied != y.denied || x.lastNode != y.lastNode {
			return false
		}
	}
	return true
}

// counterCalls counts what a strategy asks of its Counter, and keeps the
// last count of every window it has seen in a reply (for one key).
type counterCalls struct {
	cluster.Counter
	mu         sync.Mutex
	calls, add int64
	final      map[int64]int64
}

func (c *counterCalls) Add(ctx context.Context, adds []cluster.CounterAdd) ([]cluster.CounterRead, error) {
	reads, err := c.Counter.Add(ctx, adds)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.add += int64(len(adds))
	if c.final == nil {
		c.final = map[int64]int64{}
	}
	// A window's count only grows: the largest seen is the last.
	for _, r := range reads {
		c.final[r.Window] = max(c.final[r.Window], r.Current)
		c.final[r.Window-1] = max(c.final[r.Window-1], r.Previous)
	}
	return reads, err
}

// counterSkewedClock is a node's clock, off the fleet's by skew.
type counterSkewedClock struct {
	base floodgate.Clock
	skew time.Duration
}

func (c counterSkewedClock) Now() time.Time { return c.base.Now().Add(c.skew) }

// counterHammer sends requests unit requests to l from 8 goroutines while
// round runs alongside, and returns how many were admitted: a lone node
// must admit exactly min(requests, rate) under any interleaving.
func counterHammer(t *testing.T, l floodgate.Limiter, limit floodgate.Limit, requests int, round func(context.Context) error) int64 {
	t.Helper()
	ctx := context.Background()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	roundsDone := make(chan error, 1)
	go func() {
		var err error
		for err == nil {
			select {
			case <-stop:
				roundsDone <- nil
				return
			default:
				err = round(ctx)
			}
		}
		roundsDone <- err
	}()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range requests / 8 {
				d, err := l.AllowN(ctx, "hot", limit, 1)
				if err != nil {
					t.Errorf("goroutine %d: %v", g, err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-roundsDone; err != nil {
		t.Fatal(err)
	}
	return admitted.Load()
}
