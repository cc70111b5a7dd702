package adaptive

import (
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

var healthEpoch = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func newTestHealth(t interface{ Fatal(...any) }, window time.Duration, slots int) (*Health, *floodgate.ManualClock) {
	clock := floodgate.NewManualClock(healthEpoch)
	h, err := NewHealth(HealthOptions{Window: window, Slots: slots, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return h, clock
}

// The p99 is the ⌈0.99·n⌉-th smallest latency, to within 1/32 of it: the
// half-width of its log-spaced bucket.
func TestHealthP99IsWithinItsStatedError(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h, _ := newTestHealth(t, time.Second, 1)
		gen := rapid.OneOf(
			rapid.Int64Range(0, 40),              // exact buckets
			rapid.Int64Range(0, 200_000),         // up to 200ms
			rapid.Int64Range(0, int64(1<<31-1)),  // everything Health tells apart
			rapid.Int64Range(990_000, 1_010_000)) // a tight cluster
		us := rapid.SliceOfN(gen, 1, 500).Draw(t, "latencies µs")
		for _, v := range us {
			h.Record(time.Duration(v)*time.Microsecond+time.Duration(rapid.IntRange(0, 999).Draw(t, "ns")), false)
		}
		slices.Sort(us)
		want := float64(us[int(math.Ceil(0.99*float64(len(us))))-1])
		got := float64(h.Snapshot().P99 / time.Microsecond)
		if math.Abs(got-want) > want/32 {
			t.Fatalf("p99 of %d latencies: got %vµs, want %vµs ± 1/32", len(us), got, want)
		}
	})
}

// Outcomes count for the window and then age out a sub-interval at a time.
func TestHealthWindowSlides(t *testing.T) {
	h, clock := newTestHealth(t, time.Second, 10) // sub-intervals of 100ms
	for range 98 {
		h.Record(10*time.Millisecond, false)
	}
	h.Record(time.Second, true)
	h.Record(time.Second, true)
	clock.Advance(500 * time.Millisecond)
	for range 100 {
		h.Record(20*time.Millisecond, false)
	}
	for _, step := range []struct {
		advance time.Duration
		want    HealthSnapshot
	}{
		{0, HealthSnapshot{Calls: 200, Errors: 2, P99: 20 * time.Millisecond, ErrorRatio: 0.01}},
		{400 * time.Millisecond, HealthSnapshot{Calls: 200, Errors: 2, P99: 20 * time.Millisecond, ErrorRatio: 0.01}},
		{100 * time.Millisecond, HealthSnapshot{Calls: 100, P99: 20 * time.Millisecond}}, // the first 100ms aged out
		{499 * time.Millisecond, HealthSnapshot{Calls: 100, P99: 20 * time.Millisecond}},
		{time.Millisecond, HealthSnapshot{}},
		{time.Hour, HealthSnapshot{}},
	} {
		clock.Advance(step.advance)
		got, want := h.Snapshot(), step.want
		if !near(got.P99, want.P99) {
			t.Fatalf("at +%s: p99 %s, want %s ± 1/32", clock.Now().Sub(healthEpoch), got.P99, want.P99)
		}
		if got.P99 = want.P99; got != want {
			t.Fatalf("at +%s: %+v, want %+v", clock.Now().Sub(healthEpoch), got, want)
		}
	}
}

// near reports whether a quantile estimate is within Health's stated
// error, 1/32, of the latency it stands for.
func near(got, want time.Duration) bool {
	return (got - want).Abs() <= want/32
}

// A clock that goes backwards records in the newest sub-interval rather
// than in one that has aged out.
func TestHealthClockBackwards(t *testing.T) {
	h, clock := newTestHealth(t, time.Second, 10)
	h.Record(time.Millisecond, false)
	clock.Advance(-time.Hour)
	h.Record(time.Millisecond, true)
	clock.Advance(time.Hour)
	if s := h.Snapshot(); s.Calls != 2 || s.Errors != 1 {
		t.Fatalf("got %+v, want both outcomes", s)
	}
}

func TestHealthOptionsAreChecked(t *testing.T) {
	for _, c := range []struct {
		opts HealthOptions
		want string
	}{
		{HealthOptions{Slots: -1}, "Slots"},
		{HealthOptions{Slots: 1001}, "Slots"},
		{HealthOptions{Window: time.Millisecond, Slots: 10}, "Window"},
		{HealthOptions{Window: -time.Second}, "Window"},
	} {
		_, err := NewHealth(c.opts)
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewHealth(%+v) = %v, want ErrInvalidOptions naming %s", c.opts, err, c.want)
		}
	}
	if h, err := NewHealth(HealthOptions{}); err != nil || h.Window() != DefaultHealthWindow {
		t.Fatalf("defaults: %v, %v", h, err)
	}
}

func TestHealthRecordDoesNotAllocate(t *testing.T) {
	h, clock := newTestHealth(t, time.Second, 10)
	if n := testing.AllocsPerRun(1000, func() {
		clock.Advance(time.Millisecond)
		h.Record(3*time.Millisecond, false)
	}); n != 0 {
		t.Fatalf("Record allocates %v times", n)
	}
}

func TestHealthConcurrentRecords(t *testing.T) {
	h, clock := newTestHealth(t, time.Second, 10)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				h.Record(time.Duration(i)*time.Microsecond, i%10 == g)
				if g == 0 && i%100 == 0 {
					clock.Advance(10 * time.Millisecond) // the window slides meanwhile, within its span
					h.Snapshot()
				}
			}
		})
	}
	wg.Wait()
	if s := h.Snapshot(); s.Calls != 8000 || s.Errors != 800 {
		t.Fatalf("got %+v, want 8000 calls, 800 errors", s)
	}
}

// The transport counts transport errors, 5xx and 429 as failures.
func TestHealthTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/busy":
			w.WriteHeader(http.StatusTooManyRequests)
		case "/broken":
			w.WriteHeader(http.StatusBadGateway)
		case "/missing":
			w.WriteHeader(http.StatusNotFound) // the caller's mistake, not overload
		}
	}))
	defer srv.Close()
	h, _ := newTestHealth(t, time.Second, 10)
	client := &http.Client{Transport: h.Transport(nil)}
	for _, path := range []string{"/", "/busy", "/broken", "/missing"} {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if _, err := client.Get("http://127.0.0.1:1/"); err == nil {
		t.Fatal("a call to a closed port succeeded")
	}
	if s := h.Snapshot(); s.Calls != 5 || s.Errors != 3 {
		t.Fatalf("got %+v, want 5 calls, 3 failed (429, 502, connection refused)", s)
	}
}

func BenchmarkHealthRecord(b *testing.B) {
	h, err := NewHealth(HealthOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.Record(5*time.Millisecond, false)
		}
	})
}
