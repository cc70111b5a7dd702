// Package timing helps tests about real time hold on a busy machine: a
// Probe measures how late the scheduler runs this process, so that a
// bound is asserted as "the code's own bound + the lateness measured over
// the same interval + a small stated constant" instead of a guess that a
// loaded CI machine breaks; Summarize reports a distribution of latencies.
//
// It is a package of its own, beside testkit, so that tests inside
// packages that testkit itself imports (failover) can use it.
package timing

import (
	"fmt"
	"math"
	"os"
	"runtime/metrics"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Probe measures how late this process's goroutines run after the
// time they asked for, so that a test about real time can allow for a busy
// machine by measuring it instead of guessing a constant.
//
// One goroutine sleeps ProbeTick after ProbeTick and records each wake-up. A
// goroutine that waits for a timer of its own (a deadline) in the same
// interval is woken by the same timer machinery on the same CPUs, so when
// the machine is too busy to run this process on time, both are late
// together: a bound "returns by its deadline" holds in a test as "returns
// by its deadline + Late(over the same interval) + a small constant".
// Late sums the lateness over the interval, so it also covers a call held
// up several times; on an idle machine it is about a tenth of a
// millisecond for each millisecond of the interval.
//
// A call that depends on another process (a Redis server on the same
// machine) is also late when that process is not run: Watch adds its waits
// for a CPU, as the kernel counts them, to Late.
//
// It also reads, for its report, what the kernel says: how long this
// process's threads waited in a run queue (/proc/self/task/*/schedstat, on
// Linux) and the Go scheduler's own runnable-to-running latencies.
type Probe struct {
	tick time.Duration

	mu      sync.Mutex
	wakes   []wake // in time order
	stopped bool
	watch   func() int // the process whose CPU waits count too (Watch)

	stop, done chan struct{}

	start      time.Time
	startWait  time.Duration // run-queue wait of the process's threads at start
	startHist  *metrics.Float64Histogram
	wall, wait time.Duration // set by Stop
	schedHist  *metrics.Float64Histogram
}

// wake is one sleep of the probe: it asked for ProbeTick at asleep and ran
// again at woke, when the watched process pid had waited for a CPU
// peerWait in all.
type wake struct {
	asleep, woke time.Time
	pid          int
	peerWait     time.Duration
}

// Slack is what a call may take beyond its own bound and the lateness a
// Probe measured over it: the call's own work after its deadline (building
// an error, a failure policy's decision) and the distance between the
// probe's wake-ups and the caller's. 10 ms holds under -race with two
// CPU-bound processes beside the test on 2 cores.
const Slack = 10 * time.Millisecond

// Patience bounds a wait for something that must happen (a server to
// start, a reload to apply, a goroutine to return): long enough that only a
// hang reaches it, however busy the machine, so that it bounds the test and
// is never its assertion.
const Patience = time.Minute

// ProbeTick is how long the probe sleeps between wake-ups.
const ProbeTick = time.Millisecond

// maxWakes bounds the probe's memory (about 17 minutes of wake-ups).
const maxWakes = 1 << 20

// StartProbe starts a probe that runs until Stop or the end of the
// test.
func StartProbe(tb testing.TB) *Probe {
	tb.Helper()
	p := &Probe{tick: ProbeTick, stop: make(chan struct{}), done: make(chan struct{}),
		start: time.Now(), startHist: schedLatencies()}
	p.startWait, _ = RunQueueWait()
	go p.run()
	tb.Cleanup(p.Stop)
	return p
}

func (p *Probe) run() {
	defer close(p.done)
	t := time.NewTimer(p.tick)
	defer t.Stop()
	for {
		asleep := time.Now()
		t.Reset(p.tick)
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		w := wake{asleep: asleep, woke: time.Now()}
		p.mu.Lock()
		watch := p.watch
		p.mu.Unlock()
		if watch != nil {
			if pid := watch(); pid > 0 {
				if wait, ok := processWait(pid); ok {
					w.pid, w.peerWait = pid, wait
				}
			}
		}
		p.mu.Lock()
		if len(p.wakes) < maxWakes {
			p.wakes = append(p.wakes, w)
		}
		p.mu.Unlock()
	}
}

// Stop ends the probe; it is safe to call more than once. Late and String
// still answer about the time it ran.
func (p *Probe) Stop() {
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.wall = time.Since(p.start)
	if w, ok := RunQueueWait(); ok {
		p.wait = w - p.startWait
	}
	p.schedHist = subtract(schedLatencies(), p.startHist)
}

// Watch makes Late count, besides this process's lateness, how long the
// process pid names waited for a CPU: a server the calls depend on (such
// as testkit.Server.Pid), which is late for the same reason when the
// machine does not run it. pid may change (a restart) and be 0 (not
// running). Where the kernel does not say (not Linux), it counts nothing.
func (p *Probe) Watch(pid func() int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watch = pid
}

// Late returns how long, in all, the probe was kept from running on time
// during [from, to]: the sum of the lateness of its wake-ups whose sleeps
// overlapped the interval, plus how long the watched process waited for a
// CPU over those sleeps. A goroutine of this process that needed the CPU
// during the interval, as often as it liked, was held up for about as
// long, whether the machine stalled once or several times.
func (p *Probe) Late(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The first sleep that ended at or after from.
	i := sort.Search(len(p.wakes), func(i int) bool { return !p.wakes[i].woke.Before(from) })
	var late time.Duration
	for ; i < len(p.wakes) && !p.wakes[i].asleep.After(to); i++ {
		late += p.wakes[i].late(p.tick)
		if i > 0 && p.wakes[i].pid != 0 && p.wakes[i].pid == p.wakes[i-1].pid {
			late += max(0, p.wakes[i].peerWait-p.wakes[i-1].peerWait)
		}
	}
	if i == len(p.wakes) && !p.stopped { // the interval runs past the last wake-up: the sleep in progress counts too
		if n := len(p.wakes); n > 0 {
			late += max(0, time.Since(p.wakes[n-1].woke)-p.tick)
		}
	}
	return late
}

func (w wake) late(tick time.Duration) time.Duration {
	return max(0, w.woke.Sub(w.asleep)-tick)
}

// String reports the lateness of the probe's wake-ups (their
// distribution), and, once stopped, how long the process's threads waited
// for a CPU in all (the sum over threads, so it can exceed the wall time)
// and the Go scheduler's runnable-to-running latencies.
func (p *Probe) String() string {
	p.mu.Lock()
	lates := make([]time.Duration, len(p.wakes))
	var peer time.Duration
	for i, w := range p.wakes {
		lates[i] = w.late(p.tick)
		if i > 0 && w.pid != 0 && w.pid == p.wakes[i-1].pid {
			peer += max(0, w.peerWait-p.wakes[i-1].peerWait)
		}
	}
	watched := p.watch != nil
	p.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "timer lateness (%s ticks) %s", p.tick, Summarize(lates))
	if watched {
		fmt.Fprintf(&b, "; the watched process waited for a CPU %s", peer.Round(time.Millisecond))
	}
	if p.wall > 0 {
		fmt.Fprintf(&b, "; threads waited for a CPU %s in %s of wall time", p.wait.Round(time.Millisecond), p.wall.Round(time.Millisecond))
	}
	if h := p.schedHist; h != nil {
		fmt.Fprintf(&b, "; goroutines runnable before running p99 ≤ %s, max ≤ %s", histAt(h, 0.99), histAt(h, 1))
	}
	return b.String()
}

// RunQueueWait is how long, in all, the threads of this process have
// waited in a run queue for a CPU since they started (field 2 of
// /proc/self/task/*/schedstat, summed); false where the kernel does not
// say (not Linux, or schedstats off). Threads that have exited no longer
// count, so compare two readings only for a steady set of threads.
func RunQueueWait() (time.Duration, bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	var sum time.Duration
	read := false
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/schedstat")
		if err != nil {
			continue // the thread has exited
		}
		if wait, ok := parseWait(b); ok {
			sum += wait
			read = true
		}
	}
	return sum, read
}

// processWait is how long the main thread of process pid has waited in a
// run queue since it started (field 2 of /proc/PID/schedstat).
func processWait(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0, false
	}
	return parseWait(b)
}

func parseWait(schedstat []byte) (time.Duration, bool) {
	f := strings.Fields(string(schedstat))
	if len(f) < 2 {
		return 0, false
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	return time.Duration(ns), err == nil
}

const schedLatencyMetric = "/sched/latencies:seconds"

func schedLatencies() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: schedLatencyMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// subtract returns the counts added to a since b (same buckets).
func subtract(a, b *metrics.Float64Histogram) *metrics.Float64Histogram {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return nil
	}
	d := &metrics.Float64Histogram{Counts: slices.Clone(a.Counts), Buckets: a.Buckets}
	for i := range d.Counts {
		d.Counts[i] -= b.Counts[i]
	}
	return d
}

// histAt is the upper bound of the bucket holding quantile q.
func histAt(h *metrics.Float64Histogram, q float64) time.Duration {
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= max(want, 1) {
			upper := h.Buckets[i+1]
			if math.IsInf(upper, 1) {
				upper = h.Buckets[i]
			}
			return time.Duration(upper * float64(time.Second)).Round(time.Microsecond)
		}
	}
	return 0
}

// Distribution is a summary of durations: how many, and their quantiles.
type Distribution struct {
	N                   int
	P50, P99, P999, Max time.Duration
}

// Summarize sorts ds (in place) and summarizes it.
func Summarize(ds []time.Duration) Distribution {
	if len(ds) == 0 {
		return Distribution{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return Distribution{N: len(ds), P50: at(0.50), P99: at(0.99), P999: at(0.999), Max: ds[len(ds)-1]}
}

func (d Distribution) String() string {
	r := func(x time.Duration) time.Duration {
		if x < time.Millisecond {
			return x.Round(time.Microsecond)
		}
		return x.Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("n=%d p50 %s p99 %s p999 %s max %s", d.N, r(d.P50), r(d.P99), r(d.P999), r(d.Max))
}

// Over is how much longer than bound a call that started at start and took
// took ran, beyond how late the probe saw the scheduler run this process
// during the call: at most 0 when the call kept its bound but for the
// machine's lateness.
func (p *Probe) Over(start time.Time, took, bound time.Duration) time.Duration {
	return took - bound - p.Late(start, start.Add(took))
}
