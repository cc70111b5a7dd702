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
// It measures, over any interval (Late):
//
//   - timers: one goroutine sleeps ProbeTick after ProbeTick; the time its
//     wake-ups came later than asked is what a goroutine waiting for a
//     deadline of its own lost to the timer machinery and the CPUs;
//   - goroutines: the longest a goroutine of this process waited, runnable,
//     for the Go scheduler to run it (runtime/metrics /sched/latencies);
//   - threads: the longest one thread of this process waited, runnable, for
//     the kernel to run it (/proc/self/task/*/schedstat): a goroutine
//     running on it stalled as long, which neither of the above sees; and
//     how long all of them waited, for a path through several goroutines;
//   - a watched process (Watch): how long, say, the redis-server a call
//     depends on waited for a CPU;
//   - the kernel's softirq threads (ksoftirqd, Linux): how long they waited
//     for a CPU, during which packets, on loopback too, wait to be
//     delivered.
//
// A bound "returns by its deadline" holds in a test as "returns by its
// deadline + Late(over the same interval) + Slack". On an idle machine Late
// is about a tenth of a millisecond for each millisecond of the interval.
// Samples of the kernel's and the runtime's counters are taken every
// SampleEvery.
type Probe struct {
	tick time.Duration

	mu      sync.Mutex
	wakes   []time.Time // the timer goroutine's wake-ups, in order
	samples []sample    // every SampleEvery, in order
	stopped bool
	watch   func() int // the process whose CPU waits count too (Watch)

	stop     chan struct{}
	wg       sync.WaitGroup
	softirqd []int // the pids of the kernel's softirq threads

	start     time.Time
	startHist *metrics.Float64Histogram
	wall      time.Duration // set by Stop
	schedHist *metrics.Float64Histogram
}

// sample is what the kernel and the runtime said at one time.
type sample struct {
	at      time.Time
	threads []threadWait  // this process's threads, by id: their run-queue waits so far
	pid     int           // the watched process, 0 if none
	peer    time.Duration // its main thread's run-queue wait so far
	softirq time.Duration // the softirq threads' run-queue waits so far
	sched   time.Duration // the longest a goroutine waited to run since the previous sample
}

type threadWait struct {
	tid  int
	wait time.Duration
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

// ProbeTick is how long the probe's timer goroutine sleeps between
// wake-ups.
const ProbeTick = time.Millisecond

// SampleEvery is how often the probe reads the kernel's and the runtime's
// counters (a few tens of microseconds of CPU each time).
const SampleEvery = 5 * time.Millisecond

// maxWakes bounds the probe's memory (about 17 minutes of wake-ups, and
// as long of samples).
const maxWakes = 1 << 20

// StartProbe starts a probe that runs until Stop or the end of the
// test.
func StartProbe(tb testing.TB) *Probe {
	tb.Helper()
	p := &Probe{tick: ProbeTick, stop: make(chan struct{}), start: time.Now(), startHist: schedLatencies(),
		softirqd: kernelThreads("ksoftirqd/")}
	p.wg.Add(2)
	go p.timers()
	go p.sampler()
	tb.Cleanup(p.Stop)
	return p
}

func (p *Probe) timers() {
	defer p.wg.Done()
	t := time.NewTimer(p.tick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		t.Reset(p.tick)
		p.mu.Lock()
		if len(p.wakes) < maxWakes {
			p.wakes = append(p.wakes, now)
		}
		p.mu.Unlock()
	}
}

func (p *Probe) sampler() {
	defer p.wg.Done()
	t := time.NewTicker(SampleEvery)
	defer t.Stop()
	prev := schedLatencies()
	for {
		p.mu.Lock()
		watch := p.watch
		p.mu.Unlock()
		s := sample{at: time.Now(), threads: threadWaits()}
		for _, pid := range p.softirqd {
			if wait, ok := processWait(pid); ok {
				s.softirq += wait
			}
		}
		if watch != nil {
			if pid := watch(); pid > 0 {
				if wait, ok := processWait(pid); ok {
					s.pid, s.peer = pid, wait
				}
			}
		}
		if h := schedLatencies(); h != nil {
			if d := subtract(h, prev); d != nil {
				s.sched = histAt(d, 1)
			}
			prev = h
		}
		p.mu.Lock()
		if len(p.samples) < maxWakes {
			p.samples = append(p.samples, s)
		}
		p.mu.Unlock()
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
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
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.wall = time.Since(p.start)
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

// Lateness is what a Probe measured over an interval (see Probe).
type Lateness struct {
	Timers     time.Duration // the timer goroutine's wake-ups, summed
	Stall      time.Duration // the latest single wake-up: the longest the process stood still
	Goroutines time.Duration // the longest a goroutine waited to run
	Thread     time.Duration // the longest one thread waited for a CPU
	Threads    time.Duration // all threads' waits for a CPU, summed
	Watched    time.Duration // the watched process's waits for a CPU
	Kernel     time.Duration // the softirq threads' waits for a CPU, summed
}

// Total is how late one goroutine's work (a caller returning after its
// deadline) may be through no fault of its own.
func (l Lateness) Total() time.Duration { return l.Timers + l.Goroutines + l.Thread + l.Watched }

// Chain is how late work handed from goroutine to goroutine, and so from
// thread to thread, and over the network (a request through a client
// library, a proxy and a server), may be through no fault of its own: it
// counts every thread's waits, and the kernel's.
func (l Lateness) Chain() time.Duration {
	return l.Timers + l.Goroutines + l.Threads + l.Watched + l.Kernel
}

func (l Lateness) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	return fmt.Sprintf("%v, %v along a chain (timers %v, the longest stall %v, goroutines %v, a thread %v of all threads' %v, watched %v, softirq %v)",
		r(l.Total()), r(l.Chain()), r(l.Timers), r(l.Stall), r(l.Goroutines), r(l.Thread), r(l.Threads), r(l.Watched), r(l.Kernel))
}

// Late returns how late this process (and the watched one) ran during
// [from, to] for one goroutine's work: Measure(from, to).Total().
func (p *Probe) Late(from, to time.Time) time.Duration { return p.Measure(from, to).Total() }

// Measure returns what the probe measured over [from, to], by kind.
func (p *Probe) Measure(from, to time.Time) Lateness {
	p.mu.Lock()
	defer p.mu.Unlock()
	var l Lateness
	// The sleeps that overlap the interval: the one that ended first at or
	// after from, and those after it that began by to.
	i := sort.Search(len(p.wakes), func(i int) bool { return !p.wakes[i].Before(from) })
	for ; i < len(p.wakes) && !p.asleep(i).After(to); i++ {
		l.addWake(p.wakes[i].Sub(p.asleep(i)) - p.tick)
	}
	if i == len(p.wakes) && !p.stopped { // the sleep in progress
		l.addWake(time.Since(p.asleep(i)) - p.tick)
	}
	if len(p.samples) == 0 {
		return l
	}
	// The samples that bracket the interval.
	a := max(0, sort.Search(len(p.samples), func(i int) bool { return p.samples[i].at.After(from) })-1)
	b := min(len(p.samples)-1, sort.Search(len(p.samples), func(i int) bool { return !p.samples[i].at.Before(to) }))
	for k := a + 1; k <= b; k++ {
		s, prev := p.samples[k], p.samples[k-1]
		l.Goroutines = max(l.Goroutines, s.sched)
		if s.pid != 0 && s.pid == prev.pid {
			l.Watched += max(0, s.peer-prev.peer)
		}
		l.Kernel += max(0, s.softirq-prev.softirq)
	}
	l.Thread, l.Threads = threadWaitsSince(p.samples[a].threads, p.samples[b].threads)
	return l
}

// addWake counts one of the timer goroutine's wake-ups that came late
// by late.
func (l *Lateness) addWake(late time.Duration) {
	late = max(0, late)
	l.Timers += late
	l.Stall = max(l.Stall, late)
}

// asleep is when the sleep that ended with wake-up i began.
func (p *Probe) asleep(i int) time.Time {
	if i == 0 {
		return p.start
	}
	return p.wakes[i-1]
}

// threadWaitsSince is the most any one thread waited between two readings
// (both by thread id), and what all of them waited.
func threadWaitsSince(before, after []threadWait) (longest, all time.Duration) {
	j := 0
	for _, t := range after {
		for j < len(before) && before[j].tid < t.tid {
			j++
		}
		base := time.Duration(0) // a thread started since
		if j < len(before) && before[j].tid == t.tid {
			base = before[j].wait
		}
		longest = max(longest, t.wait-base)
		all += max(0, t.wait-base)
	}
	return longest, all
}

// String reports the lateness of the probe's wake-ups (their
// distribution), how long the watched process waited for a CPU, and, once
// stopped, how long this process's threads waited for a CPU in all (the
// sum over threads, so it can exceed the wall time) and the Go scheduler's
// runnable-to-running latencies.
func (p *Probe) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	lates := make([]time.Duration, len(p.wakes))
	for i := range p.wakes {
		lates[i] = max(0, p.wakes[i].Sub(p.asleep(i))-p.tick)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "timer lateness (%s ticks) %s", p.tick, Summarize(lates))
	if n := len(p.samples); n > 1 {
		first, last := p.samples[0], p.samples[n-1]
		var threads, peer time.Duration
		softirq := last.softirq - first.softirq
		for _, t := range last.threads {
			threads += t.wait
		}
		for _, t := range first.threads {
			threads -= t.wait
		}
		for k := 1; k < n; k++ {
			if s := p.samples[k]; s.pid != 0 && s.pid == p.samples[k-1].pid {
				peer += max(0, s.peer-p.samples[k-1].peer)
			}
		}
		fmt.Fprintf(&b, "; threads waited for a CPU %s in %s", threads.Round(time.Millisecond), last.at.Sub(first.at).Round(time.Millisecond))
		if p.watch != nil {
			fmt.Fprintf(&b, ", the watched process %s", peer.Round(time.Millisecond))
		}
		if len(p.softirqd) > 0 {
			fmt.Fprintf(&b, ", the softirq threads %s", softirq.Round(time.Millisecond))
		}
	}
	if h := p.schedHist; h != nil {
		fmt.Fprintf(&b, "; goroutines runnable before running p99 ≤ %s, max ≤ %s", histAt(h, 0.99), histAt(h, 1))
	}
	return b.String()
}

// threadWaits reads the run-queue wait of each thread of this process, by
// thread id; nil where the kernel does not say.
func threadWaits() []threadWait {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	waits := make([]threadWait, 0, len(tasks))
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/schedstat")
		if err != nil {
			continue // the thread has exited
		}
		if wait, ok := parseWait(b); ok {
			waits = append(waits, threadWait{tid, wait})
		}
	}
	slices.SortFunc(waits, func(a, b threadWait) int { return a.tid - b.tid })
	return waits
}

// RunQueueWait is how long, in all, the threads of this process have
// waited in a run queue for a CPU since they started (field 2 of
// /proc/self/task/*/schedstat, summed); false where the kernel does not
// say (not Linux, or schedstats off). Threads that have exited no longer
// count, so compare two readings only for a steady set of threads.
func RunQueueWait() (time.Duration, bool) {
	waits := threadWaits()
	var sum time.Duration
	for _, t := range waits {
		sum += t.wait
	}
	return sum, len(waits) > 0
}

// kernelThreads returns the pids of the kernel threads whose names start
// with prefix (as /proc/PID/comm has them); none where there is no /proc.
func kernelThreads(prefix string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, err := os.ReadFile("/proc/" + e.Name() + "/comm"); err == nil && strings.HasPrefix(string(comm), prefix) {
			pids = append(pids, pid)
		}
	}
	return pids
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
