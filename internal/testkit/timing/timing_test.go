package timing

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	ds := make([]time.Duration, 1000)
	for i := range ds {
		ds[i] = time.Duration(1000-i) * time.Millisecond
	}
	got := Summarize(ds)
	want := Distribution{N: 1000, P50: 501 * time.Millisecond, P99: 991 * time.Millisecond, P999: 1000 * time.Millisecond, Max: 1000 * time.Millisecond}
	if got != want {
		t.Fatalf("Summarize = %+v, want %+v", got, want)
	}
	if (Summarize(nil) != Distribution{}) {
		t.Fatal("Summarize(nil) is not zero")
	}
}

func TestThreadWaitsSince(t *testing.T) {
	before := []threadWait{{1, 10}, {2, 20}, {4, 40}}
	after := []threadWait{{1, 15}, {3, 7}, {4, 60}} // 2 exited, 3 started
	longest, all := threadWaitsSince(before, after)
	if longest != 20 || all != 5+7+20 {
		t.Fatalf("longest %v, all %v; want 20, 32", longest, all)
	}
}

// The probe measures over any interval, counts nothing negative, and
// reports what it saw.
func TestProbe(t *testing.T) {
	p := StartProbe(t)
	calls := 0
	p.Watch(func() int { calls++; return 0 })
	from := time.Now()
	time.Sleep(30 * time.Millisecond)
	to := time.Now()
	// Stopped, the probe measures the same every time: running, a sleep
	// in progress counts up to now, and may count for less once its wake
	// is recorded.
	p.Stop()
	l := p.Measure(from, to)
	if l.Timers < 0 || l.Stall < 0 || l.Stall > l.Timers || l.Goroutines < 0 || l.Thread < 0 || l.Threads < l.Thread || l.Watched != 0 {
		t.Fatalf("Measure = %v", l)
	}
	if p.Late(from, to) != l.Total() || l.Chain() < l.Total() { // a chain counts every thread's waits
		t.Fatalf("Late %v, Total %v, Chain %v", p.Late(from, to), l.Total(), l.Chain())
	}
	if over := p.Over(from, to.Sub(from), to.Sub(from)); over > 0 {
		t.Fatalf("Over = %v for a call that took exactly its bound", over)
	}
	p.Stop()
	if calls == 0 {
		t.Error("the watched process was never asked for")
	}
	if s := p.String(); !strings.Contains(s, "timer lateness") || !strings.Contains(s, "goroutines runnable") {
		t.Errorf("String = %q", s)
	}
	if s := fmt.Sprint(p.Measure(from, to)); !strings.Contains(s, "timers") {
		t.Errorf("after Stop, Measure = %q", s)
	}
}

// TestStallIsTheLatestWakeUp: Timers sums how late every wake-up came,
// Stall is the latest single one, over the wake-ups of the interval only.
func TestStallIsTheLatestWakeUp(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := &Probe{tick: time.Millisecond, start: t0, stopped: true,
		// late by 0, 0, 7 ms, 0, 2 ms, 0
		wakes: []time.Time{at(1), at(2), at(10), at(11), at(14), at(15)}}
	for _, c := range []struct {
		from, to      int
		timers, stall time.Duration
	}{
		{0, 15, 9 * time.Millisecond, 7 * time.Millisecond},
		{11, 15, 2 * time.Millisecond, 2 * time.Millisecond},
		{0, 1, 0, 0},
		{3, 9, 7 * time.Millisecond, 7 * time.Millisecond}, // inside the long sleep
	} {
		l := p.Measure(at(c.from), at(c.to))
		if l.Timers != c.timers || l.Stall != c.stall {
			t.Errorf("Measure(%d ms, %d ms): timers %v, stall %v; want %v, %v", c.from, c.to, l.Timers, l.Stall, c.timers, c.stall)
		}
	}
}
