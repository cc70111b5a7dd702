// Package gcfloor keeps the garbage collector's heap goal from falling
// below a floor.
//
// Go's collector runs when the heap has grown by GOGC percent of what the
// last cycle found live (and of the goroutine stacks and globals it scans).
// A rate limit service keeps little live (a few MB: its state is in Redis,
// or in a bounded key table) and allocates fast (every request), so with
// the default GOGC of 100 it collects many times a second: floodgate serve
// under load on two cores ran 57 cycles a second with 4 MB live, and the
// collector took a third of its CPU (marking, assists, and the handler
// goroutines' stacks, shrunk at each cycle and grown again by the next
// request). Raising GOGC for good would multiply the heap of a service
// that does keep much live; a floor instead raises GOGC only while what is
// live is small, so that the heap goal is at least the floor, and gives
// GOGC back as the live heap grows past it. A memory limit (GOMEMLIMIT)
// still bounds the heap: the collector honours the lower of the two goals.
//
// The runtime has one collector, so the package keeps one state for the
// process: Start adds a floor, its stop removes it, and the highest floor
// started applies. GOGC=off turns the package off.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
)

// maxPercent bounds the GOGC the floor sets: with next to nothing live, a
// floor divided by it would be a huge percent, and a burst of live data
// would then be allowed to grow the heap by as much.
const maxPercent = 10_000

// percentFor is the GOGC that makes the heap goal at least floor bytes:
// the goal is live + (live + roots) × GOGC / 100, roots being the stacks
// and globals the collector scans. It is never below base (the process's
// own GOGC), nor above maxPercent.
func percentFor(floor, live, roots uint64, base int) int {
	if live >= floor || live+roots == 0 {
		return base
	}
	p := (floor - live) * 100 / (live + roots)
	return max(base, int(min(p, maxPercent)))
}

// state is the process's floors and the tuning they make.
type state struct {
	mu     sync.Mutex
	floors map[*uint64]struct{} // those started and not stopped
	base   int                  // GOGC from the environment
	set    int                  // the GOGC set last; 0 when none
	armed  bool                 // a sentinel waits for the next cycle
	tuned  func(percent int)    // for tests: called after each cycle's tuning
}

var process = state{floors: map[*uint64]struct{}{}}

// Start keeps the heap goal at least floor bytes until stop is called. A
// floor of 0, or GOGC=off in the environment, does nothing.
func Start(floor uint64) (stop func()) {
	return process.start(floor)
}

func (s *state) start(floor uint64) func() {
	base, ok := envPercent(os.Getenv("GOGC"))
	if floor == 0 || !ok {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := &floor
	if len(s.floors) == 0 {
		s.base = base
	}
	s.floors[key] = struct{}{}
	if !s.armed {
		s.armed = true
		arm(s)
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.floors, key)
		if len(s.floors) == 0 && s.set != 0 {
			debug.SetGCPercent(s.base)
			s.set = 0
		}
	}
}

// envPercent reads GOGC as the runtime does: "off" is no collection (ok
// false), a number is a percent, anything else (or nothing) is 100.
func envPercent(v string) (percent int, ok bool) {
	if strings.EqualFold(v, "off") {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil {
		return n, n >= 0
	}
	return 100, true
}

// sentinel is garbage whose finalizer runs after the collection that
// finds it: once a cycle, the hook for tuning. It is larger than 16 bytes
// so that it has a block of its own: the runtime packs smaller objects
// without pointers together, and a finalizer on one of those runs only
// when the whole block is garbage, which may be never.
type sentinel struct{ _ [32]byte }

func arm(s *state) {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) { s.cycle() })
}

// samples are the runtime metrics a cycle's tuning reads.
var sampleNames = []string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"}

// cycle retunes GOGC after a collection, and waits for the next one while
// a floor is started.
func (s *state) cycle() {
	samples := make([]metrics.Sample, len(sampleNames))
	for i, name := range sampleNames {
		samples[i].Name = name
	}
	metrics.Read(samples)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.floors) == 0 {
		s.armed = false
		return
	}
	var floor uint64
	for f := range s.floors {
		floor = max(floor, *f)
	}
	p := percentFor(floor, value(samples[0]), value(samples[1])+value(samples[2]), s.base)
	if changed(s.set, p) {
		debug.SetGCPercent(p)
		s.set = p
	}
	if s.tuned != nil {
		s.tuned(p)
	}
	arm(s)
}

// changed reports whether p differs from the GOGC set last by more than a
// twentieth: the live heap moves a little every cycle, and the goal need
// not follow it exactly.
func changed(last, p int) bool {
	d := last - p
	return last == 0 || d*20 > last || -d*20 > last
}

func value(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}
