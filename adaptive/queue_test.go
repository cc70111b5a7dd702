package adaptive

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The queue serves the highest class first and, within a class, the
// oldest (FIFO) or the newest (LIFO) waiter first.
func TestQueueServesByClassThenOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		order := rapid.SampledFrom([]Order{FIFO, LIFO}).Draw(t, "order")
		classes := rapid.SliceOfN(rapid.SampledFrom([]Priority{Sheddable, Default, Critical}), 1, 12).Draw(t, "classes")
		r := newRig(t, 1, LimiterOptions{MaxQueue: len(classes), MaxWait: time.Second, Order: order})
		held := r.fill(t, 1)[0]
		waits := make([]<-chan acquired, len(classes))
		for i, p := range classes {
			waits[i] = r.enqueue(t.Context(), p)
		}
		want := make([]int, len(classes))
		for i := range want {
			want[i] = i
		}
		slices.SortStableFunc(want, func(a, b int) int {
			if classes[a] != classes[b] {
				return int(classes[b] - classes[a])
			}
			if order == LIFO {
				return b - a
			}
			return a - b
		})
		for k, i := range want {
			held.Success() // frees the one slot, which goes to waiter i
			r.wantQueued(t, len(want)-k-1, "after a release")
			if j := <-r.ended; j != i {
				t.Fatalf("%s queue of %v: waiter %d (%s) served before waiter %d (%s)", order, classes, j, classes[j], i, classes[i])
			}
			got := <-waits[i]
			if got.err != nil {
				t.Fatalf("%s queue of %v: waiter %d (%s) got %v, want the slot", order, classes, i, classes[i], got.err)
			}
			held = got.tok
		}
		held.Success()
		if s := r.Stats(); s.InFlight != 0 || s.Queued != 0 {
			t.Fatalf("stats %+v at the end, want nothing in flight or queued", s)
		}
	})
}

// A full queue takes a higher class by shedding the lower-class waiter that
// would be served last; it refuses a class that would displace only its
// equals or betters.
func TestFullQueueDisplacesTheLowestClass(t *testing.T) {
	for _, tc := range []struct {
		name     string
		order    Order
		queued   []Priority
		arrival  Priority
		shed     int // index in queued of the displaced waiter; -1: the arrival is refused
		wantWhen ShedReason
	}{
		{"critical displaces sheddable before default", FIFO, []Priority{Default, Sheddable}, Critical, 1, ShedDisplaced},
		{"default displaces sheddable", FIFO, []Priority{Critical, Sheddable}, Default, 1, ShedDisplaced},
		{"fifo displaces the newest of a class", FIFO, []Priority{Sheddable, Sheddable}, Default, 1, ShedDisplaced},
		{"lifo displaces the oldest of a class", LIFO, []Priority{Sheddable, Sheddable}, Default, 0, ShedDisplaced},
		{"critical does not displace critical", FIFO, []Priority{Critical, Critical}, Critical, -1, ShedQueueFull},
		{"default does not displace default", FIFO, []Priority{Default, Critical}, Default, -1, ShedQueueFull},
		{"sheddable displaces nothing", FIFO, []Priority{Sheddable, Sheddable}, Sheddable, -1, ShedQueueFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1, LimiterOptions{MaxQueue: len(tc.queued), MaxWait: time.Second, Order: tc.order})
			held := r.fill(t, 1)[0]
			ctx, cancel := context.WithCancel(t.Context())
			waits := make([]<-chan acquired, len(tc.queued))
			for i, p := range tc.queued {
				waits[i] = r.enqueue(ctx, p)
			}
			var arrival <-chan acquired
			if tc.shed >= 0 {
				arrival = r.enqueue(ctx, tc.arrival)
				r.wantQueued(t, len(tc.queued), "after a displacement")
				if j := <-r.ended; j != tc.shed {
					t.Fatalf("waiter %d displaced, want waiter %d", j, tc.shed)
				}
				got := <-waits[tc.shed]
				if reason := shedReason(t, got.err); reason != tc.wantWhen {
					t.Fatalf("displaced waiter: reason %s, want %s", reason, tc.wantWhen)
				}
			} else {
				_, err := r.Acquire(t.Context(), tc.arrival)
				if reason := shedReason(t, err); reason != tc.wantWhen {
					t.Fatalf("arrival: reason %s, want %s", reason, tc.wantWhen)
				}
			}
			s := r.Stats()
			var counted uint64
			for c := range numClasses {
				counted += s.Shed[c][tc.wantWhen]
			}
			if s.Queued != len(tc.queued) || counted != 1 {
				t.Fatalf("stats %+v: want the queue still full and one %s counted", s, tc.wantWhen)
			}
			cancel() // the waiters left give up
			for i, w := range append(waits, arrival) {
				if i != tc.shed && w != nil {
					<-w
				}
			}
			held.Ignore()
		})
	}
}

// Every Acquire ends by its deadline on a manual clock: a waiter is shed
// once it has waited MaxWait, and not before.
func TestWaitEndsAtMaxWait(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxWait := time.Duration(rapid.IntRange(1, 1000).Draw(t, "maxWait ms")) * time.Millisecond
		n := rapid.IntRange(1, 8).Draw(t, "waiters")
		r := newRig(t, 1, LimiterOptions{MaxQueue: n, MaxWait: maxWait, Order: rapid.SampledFrom([]Order{FIFO, LIFO}).Draw(t, "order")})
		held := r.fill(t, 1)[0]
		due := make([]time.Time, n)
		waits := make([]<-chan acquired, n)
		for i := range n {
			r.clock.Advance(time.Duration(rapid.IntRange(0, 300).Draw(t, "gap ms")) * time.Millisecond)
			due[i] = r.clock.Now().Add(maxWait)
			waits[i] = r.enqueue(t.Context(), rapid.SampledFrom([]Priority{Sheddable, Default, Critical}).Draw(t, "class"))
		}
		for ended := 0; ended < n; {
			r.clock.Advance(time.Duration(rapid.IntRange(1, 400).Draw(t, "step ms")) * time.Millisecond)
			r.Expire()
			now, left := r.clock.Now(), 0
			for i := range waits {
				if now.Before(due[i]) {
					left++
				}
			}
			r.wantQueued(t, left, fmt.Sprintf("at +%s, with %d waiters not yet due", now.Sub(limEpoch), left))
			for ; ended < n-left; ended++ {
				i := <-r.ended
				if now.Before(due[i]) {
					t.Fatalf("at +%s: waiter %d shed before it was due at +%s", now.Sub(limEpoch), i, due[i].Sub(limEpoch))
				}
				if reason := shedReason(t, (<-waits[i]).err); reason != ShedWaitedTooLong {
					t.Fatalf("waiter %d: reason %s, want %s", i, reason, ShedWaitedTooLong)
				}
			}
		}
		held.Ignore()
	})
}

// CoDel: a queue that has stood for a whole Interval (never empty, nobody
// admitted after waiting Target or less) sheds a waiter as soon as it has
// waited Target; one admission within Target restarts the Interval.
func TestCoDelShedsFromAStandingQueue(t *testing.T) {
	const (
		target   = 10 * time.Millisecond
		interval = 100 * time.Millisecond
		maxWait  = time.Second
	)
	for _, tc := range []struct {
		name      string
		codel     CoDel
		firstWait time.Duration // how long the first waiter waits for its slot
		wantShed  time.Duration // when the second, queued at +1ms, is shed
		reason    ShedReason
	}{
		{"first admitted within target: interval restarts", CoDel{target, interval}, 8 * time.Millisecond, 8*time.Millisecond + interval, ShedStandingQueue},
		{"first admitted after target: queue stands", CoDel{target, interval}, 20 * time.Millisecond, interval, ShedStandingQueue},
		{"nobody admitted: queue stands", CoDel{target, interval}, 2 * time.Second, interval, ShedStandingQueue},
		{"without codel: max wait", CoDel{}, 20 * time.Millisecond, time.Millisecond + maxWait, ShedWaitedTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1, LimiterOptions{MaxQueue: 2, MaxWait: maxWait, CoDel: tc.codel})
			held := r.fill(t, 1)[0]
			first := r.enqueue(t.Context(), Default)
			r.clock.Advance(time.Millisecond)
			second := r.enqueue(t.Context(), Default)
			queued := 2
			if tc.firstWait < tc.wantShed {
				r.clock.Set(limEpoch.Add(tc.firstWait))
				held.Success()
				queued = 1
				r.wantQueued(t, queued, "after the first release")
				if got := <-first; got.err != nil {
					t.Fatalf("first waiter: %v", got.err)
				} else {
					held = got.tok
				}
			}
			r.clock.Set(limEpoch.Add(tc.wantShed - time.Millisecond))
			r.Expire()
			r.wantQueued(t, queued, fmt.Sprintf("just before +%s", tc.wantShed))
			r.clock.Set(limEpoch.Add(tc.wantShed))
			r.Expire()
			r.wantQueued(t, 0, fmt.Sprintf("at +%s", tc.wantShed))
			if reason := shedReason(t, (<-second).err); reason != tc.reason {
				t.Fatalf("second waiter: reason %s, want %s", reason, tc.reason)
			}
			held.Ignore()
			if tc.firstWait >= tc.wantShed {
				<-first // shed as well, or served by the release
			}
		})
	}
}

// A waiter whose context ends leaves the queue, and a slot granted to it
// in the meantime goes back, without a sample.
func TestCancelledWaiterLeavesTheQueue(t *testing.T) {
	r := newRig(t, 1, LimiterOptions{MaxQueue: 2, MaxWait: time.Second})
	held := r.fill(t, 1)[0]
	ctx, cancel := context.WithCancel(t.Context())
	w := r.enqueue(ctx, Critical)
	cancel()
	if got := <-w; !errors.Is(got.err, context.Canceled) || errors.Is(got.err, ErrShed) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled and no shed", got.err)
	}
	if s := r.Stats(); s.Queued != 0 || s.InFlight != 1 {
		t.Fatalf("stats %+v: want the waiter gone and one in flight", s)
	}
	held.Success()
	if s := r.Stats(); s.InFlight != 0 || len(r.alg.samples) != 1 {
		t.Fatalf("stats %+v, %d samples: want nothing in flight and only the held token's sample", s, len(r.alg.samples))
	}
}

// A limit that grows serves the queue at once.
func TestRaisedLimitServesWaiters(t *testing.T) {
	r := newRig(t, 1, LimiterOptions{MaxQueue: 2, MaxWait: time.Second})
	held := r.fill(t, 1)[0]
	w := r.enqueue(t.Context(), Critical)
	r.alg.n = 3
	held.Dropped() // the release takes the new limit, which frees two slots
	r.wantQueued(t, 0, "after the limit grew")
	got := <-w
	if got.err != nil {
		t.Fatalf("waiter after the limit grew: %v", got.err)
	}
	got.tok.Success()
	if r.Limit() != 3 {
		t.Fatalf("Limit() = %d, want 3", r.Limit())
	}
}

// With a real clock, a waiter that nobody serves is shed by its own timer.
func TestSystemClockTimerShedsAWaiter(t *testing.T) {
	alg, _ := NewFixed(1)
	l, err := NewLimiter(LimiterOptions{Algorithm: alg, MaxQueue: 1, MaxWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	held, _ := l.TryAcquire(Critical)
	defer held.Ignore()
	start := time.Now()
	_, err = l.Acquire(context.Background(), Critical)
	if reason := shedReason(t, err); reason != ShedWaitedTooLong {
		t.Fatalf("reason %s, want %s", reason, ShedWaitedTooLong)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Fatalf("shed after %s, before MaxWait 20ms", waited)
	}
}

// No token leaks: whatever mix of waits, cancellations, expiries and
// releases happens, every Acquire ends in exactly one outcome, and once
// every token is released nothing is in flight or queued.
func TestEveryAcquireEndsOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 4).Draw(t, "limit")
		r := newRig(t, limit, LimiterOptions{MaxQueue: 4, MaxWait: 100 * time.Millisecond,
			CoDel: CoDel{Target: 5 * time.Millisecond, Interval: 20 * time.Millisecond}})
		var held []Token
		var waits []<-chan acquired
		var cancels []context.CancelFunc
		handedOut := 0
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				p := rapid.SampledFrom([]Priority{Sheddable, Default, Critical}).Draw(t, "class")
				if tok, ok := r.TryAcquire(p); ok {
					held, handedOut = append(held, tok), handedOut+1
				} else if s := r.Stats(); s.Queued < 4 || p > Sheddable {
					ctx, cancel := context.WithCancel(t.Context())
					if s.Queued == 4 && !r.hasLower(p) {
						cancel()
						continue // would be refused at once: Acquire does not queue it
					}
					waits, cancels = append(waits, r.enqueue(ctx, p)), append(cancels, cancel)
				}
			case 1:
				if len(cancels) > 0 {
					cancels[rapid.IntRange(0, len(cancels)-1).Draw(t, "cancel")]()
				}
			case 2:
				if len(held) > 0 {
					i := rapid.IntRange(0, len(held)-1).Draw(t, "release")
					[]func(){held[i].Success, held[i].Dropped, held[i].Ignore}[i%3]()
					held = slices.Delete(held, i, i+1)
				}
			case 3:
				r.clock.Advance(time.Duration(rapid.IntRange(1, 50).Draw(t, "ms")) * time.Millisecond)
				r.Expire()
			}
		}
		for _, cancel := range cancels {
			cancel()
		}
		for range waits {
			if got := <-waits[<-r.ended]; got.err == nil {
				held, handedOut = append(held, got.tok), handedOut+1
			}
		}
		for _, tok := range held {
			tok.Success()
			tok.Success() // a second release is a no-op
		}
		s := r.Stats()
		if s.InFlight != 0 || s.Queued != 0 {
			t.Fatalf("stats %+v after every token was released: want nothing in flight or queued", s)
		}
		var admitted uint64
		for _, n := range s.Admitted {
			admitted += n
		}
		// A slot granted to a waiter as its context ends goes back unused:
		// counted as admitted, never handed out.
		if admitted < uint64(handedOut) || admitted > uint64(handedOut+len(cancels)) {
			t.Fatalf("%d admissions counted, %d tokens handed out, %d waiters cancelled", admitted, handedOut, len(cancels))
		}
	})
}

// hasLower says whether a waiter of a class below p is queued.
func (r *rig) hasLower(p Priority) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := Sheddable; c < p; c++ {
		if r.q.head[c] != nil {
			return true
		}
	}
	return false
}
