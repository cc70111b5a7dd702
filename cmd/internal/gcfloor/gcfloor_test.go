package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
	"unsafe"

	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

func TestPercentFor(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		name               string
		floor, live, roots uint64
		base, want         int
	}{
		{"small live heap: the goal is the floor", 64 * mb, 4 * mb, 4 * mb, 100, 750},
		{"live heap at the floor: GOGC as it is", 64 * mb, 64 * mb, 1 * mb, 100, 100},
		{"live heap past the floor", 64 * mb, 200 * mb, 1 * mb, 100, 100},
		{"never below the process's GOGC", 64 * mb, 30 * mb, 2 * mb, 200, 200},
		{"nothing live yet", 64 * mb, 0, 0, 100, 100},
		{"next to nothing live: bounded", 64 * mb, 1000, 0, 100, maxPercent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentFor(tc.floor, tc.live, tc.roots, tc.base); got != tc.want {
				t.Errorf("percentFor(%d, %d, %d, %d) = %d, want %d", tc.floor, tc.live, tc.roots, tc.base, got, tc.want)
			}
		})
	}
}

func TestEnvPercent(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
		ok   bool
	}{{"", 100, true}, {"50", 50, true}, {"off", 0, false}, {"OFF", 0, false}, {"-1", -1, false}, {"x", 100, true}} {
		if got, ok := envPercent(tc.env); got != tc.want || ok != tc.ok {
			t.Errorf("envPercent(%q) = %d, %v; want %d, %v", tc.env, got, ok, tc.want, tc.ok)
		}
	}
}

// gcPercent is the GOGC in force.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// A floor far above what a test process keeps live raises GOGC after the
// next collection, and stopping it gives GOGC back.
func TestStartRaisesGOGCUntilStopped(t *testing.T) {
	t.Setenv("GOGC", "100")
	defer debug.SetGCPercent(gcPercent())
	tuned := make(chan int, 1)
	s := &state{floors: map[*uint64]struct{}{}, tuned: func(p int) {
		select {
		case tuned <- p:
		default:
		}
	}}
	stop := s.start(1 << 30)
	var p int
	deadline := time.After(timing.Patience)
	for p == 0 {
		runtime.GC()
		select {
		case p = <-tuned:
		case <-time.After(10 * time.Millisecond): // the finalizer runs after the cycle, on its own goroutine
		case <-deadline:
			t.Fatal("no cycle was tuned")
		}
	}
	if p <= 100 || gcPercent() != p {
		t.Fatalf("tuned to %d, GOGC is %d; want above 100 with a 1 GB floor", p, gcPercent())
	}
	stop()
	if got := gcPercent(); got != 100 {
		t.Fatalf("GOGC %d after stop, want the environment's 100", got)
	}
}

// GOGC=off and a zero floor leave the collector alone.
func TestStartDoesNothing(t *testing.T) {
	for _, tc := range []struct {
		env   string
		floor uint64
	}{{"off", 1 << 30}, {"100", 0}} {
		t.Setenv("GOGC", tc.env)
		s := &state{floors: map[*uint64]struct{}{}}
		stop := s.start(tc.floor)
		if len(s.floors) != 0 || s.armed {
			t.Errorf("GOGC=%s, floor %d: a floor was started", tc.env, tc.floor)
		}
		stop()
	}
}

// The runtime's tiny allocator packs objects under 16 bytes without
// pointers into shared blocks, whose finalizers may never run: the
// sentinel must not be one of them.
func TestSentinelHasABlockOfItsOwn(t *testing.T) {
	if size := unsafe.Sizeof(sentinel{}); size < 16 {
		t.Fatalf("sentinel is %d bytes: the tiny allocator would pack it", size)
	}
}
