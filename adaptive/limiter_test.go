package adaptive

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"pgregory.net/rapid"
)

var limEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// limT is what the helpers need of a *testing.T or a *rapid.T.
type limT interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// recorder is an Algorithm whose limit the test sets, and which keeps the
// samples it was given.
type recorder struct {
	n       int
	samples []Sample
}

func (r *recorder) Limit() int { return r.n }
func (r *recorder) Update(s Sample) int {
	r.samples = append(r.samples, s)
	return r.n
}

// rig is a Limiter on a manual clock whose queued waiters announce
// themselves, so that tests know when an Acquire is waiting.
type rig struct {
	*Limiter
	clock *floodgate.ManualClock
	alg   *recorder
	ended chan int // the number of each enqueued waiter, in the order they end
	waits int
}

// queuedKey carries, in an Acquire's context, the channel its Limiter's
// test hook signals when the Acquire is queued.
type queuedKey struct{}

func newRig(t limT, limit int, opts LimiterOptions) *rig {
	t.Helper()
	r := &rig{clock: floodgate.NewManualClock(limEpoch), alg: &recorder{n: limit}, ended: make(chan int, 1024)}
	opts.Algorithm, opts.Clock = r.alg, r.clock
	l, err := NewLimiter(opts)
	if err != nil {
		t.Fatal(err)
	}
	l.onQueued = func(ctx context.Context) {
		if ch, ok := ctx.Value(queuedKey{}).(chan struct{}); ok {
			ch <- struct{}{}
		}
	}
	r.Limiter = l
	return r
}

type acquired struct {
	tok Token
	err error
}

// enqueue starts an Acquire that is expected to wait, and returns once it
// waits (or, if it did not have to, once it ended). The waiters are
// numbered from 0 in the order they were enqueued; each sends its number
// to r.ended when it ends. Tests receive from r.ended only once Stats says
// that a waiter left the queue, so that a broken limiter fails them
// instead of hanging them.
func (r *rig) enqueue(ctx context.Context, p Priority) <-chan acquired {
	out, id := make(chan acquired, 1), r.waits
	queued, done := make(chan struct{}, 1), make(chan struct{})
	r.waits++
	go func() {
		tok, err := r.Acquire(context.WithValue(ctx, queuedKey{}, queued), p)
		out <- acquired{tok, err}
		close(done)
		r.ended <- id
	}()
	select {
	case <-queued:
	case <-done:
	}
	return out
}

// wantQueued fails the test unless n waiters are queued.
func (r *rig) wantQueued(t limT, n int, when string) {
	t.Helper()
	if s := r.Stats(); s.Queued != n {
		t.Fatalf("%s: %d queued, want %d (stats %+v)", when, s.Queued, n, s)
	}
}

// fill takes n slots as critical requests and returns their tokens.
func (r *rig) fill(t limT, n int) []Token {
	t.Helper()
	toks := make([]Token, n)
	for i := range toks {
		tok, ok := r.TryAcquire(Critical)
		if !ok {
			t.Fatalf("slot %d of %d refused", i+1, n)
		}
		toks[i] = tok
	}
	return toks
}

func shedReason(t limT, err error) ShedReason {
	t.Helper()
	var se *ShedError
	if !errors.As(err, &se) || !errors.Is(err, ErrShed) {
		t.Fatalf("err = %v, want a *ShedError wrapping ErrShed", err)
	}
	return se.Reason
}

func TestNewLimiterRejectsBadOptions(t *testing.T) {
	alg, _ := NewFixed(4)
	queue := func(o LimiterOptions) LimiterOptions {
		o.Algorithm, o.MaxQueue, o.MaxWait = alg, 8, time.Second
		return o
	}
	for _, tc := range []struct {
		name string
		opts LimiterOptions
	}{
		{"no algorithm", LimiterOptions{}},
		{"negative queue", LimiterOptions{Algorithm: alg, MaxQueue: -1}},
		{"unknown order", queue(LimiterOptions{Order: 7})},
		{"negative wait", LimiterOptions{Algorithm: alg, MaxQueue: 1, MaxWait: -time.Second}},
		{"queue without a wait", LimiterOptions{Algorithm: alg, MaxQueue: 1}},
		{"wait without a queue", LimiterOptions{Algorithm: alg, MaxWait: time.Second}},
		{"codel without a queue", LimiterOptions{Algorithm: alg, CoDel: CoDel{Target: time.Millisecond, Interval: time.Second}}},
		{"codel target only", queue(LimiterOptions{CoDel: CoDel{Target: time.Millisecond}})},
		{"codel target above interval", queue(LimiterOptions{CoDel: CoDel{Target: time.Second, Interval: time.Millisecond}})},
		{"share above 1", LimiterOptions{Algorithm: alg, Shares: Shares{Sheddable: 0.5, Default: 1.5}}},
		{"share of 0", LimiterOptions{Algorithm: alg, Shares: Shares{Default: 0.5}}},
		{"sheddable above default", LimiterOptions{Algorithm: alg, Shares: Shares{Sheddable: 0.9, Default: 0.5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLimiter(tc.opts)
			if !errors.Is(err, ErrInvalidOptions) || l != nil {
				t.Fatalf("NewLimiter(%+v) = %v, %v; want an error wrapping ErrInvalidOptions", tc.opts, l, err)
			}
		})
	}
}

// The shares: at limit 10 sheddable requests fill 7 slots, default 9,
// critical all 10; a limit too small to split lets every class have a slot
// while the limiter is idle.
func TestClassesFillTheirShareOfTheLimit(t *testing.T) {
	for _, tc := range []struct {
		limit  int
		shares Shares
		want   [numClasses]int // slots each class alone can fill
	}{
		{10, Shares{}, [numClasses]int{Sheddable: 7, Default: 9, Critical: 10}},
		{100, Shares{}, [numClasses]int{Sheddable: 70, Default: 90, Critical: 100}},
		{1, Shares{}, [numClasses]int{Sheddable: 1, Default: 1, Critical: 1}},
		{10, Shares{Sheddable: 0.5, Default: 0.5}, [numClasses]int{Sheddable: 5, Default: 5, Critical: 10}},
		{10, Shares{Sheddable: 1, Default: 1}, [numClasses]int{Sheddable: 10, Default: 10, Critical: 10}},
	} {
		for p := Sheddable; p <= Critical; p++ {
			r := newRig(t, tc.limit, LimiterOptions{Shares: tc.shares})
			got := 0
			for ; ; got++ {
				if _, ok := r.TryAcquire(p); !ok {
					break
				}
			}
			if got != tc.want[p] {
				t.Errorf("limit %d, shares %+v: %s filled %d slots, want %d", tc.limit, tc.shares, p, got, tc.want[p])
			}
			if s := r.Stats(); s.Shed[p][ShedAtLimit] != 1 || s.Admitted[p] != uint64(got) {
				t.Errorf("limit %d: stats %+v: want %d admitted and one shed at the limit for %s", tc.limit, s, got, p)
			}
		}
	}
}

func TestUnknownPriorityIsRefused(t *testing.T) {
	r := newRig(t, 4, LimiterOptions{})
	for _, p := range []Priority{-1, Critical + 1} {
		if _, ok := r.TryAcquire(p); ok {
			t.Errorf("TryAcquire(%d) admitted", p)
		}
		if _, err := r.Acquire(t.Context(), p); !errors.Is(err, ErrUnknownPriority) {
			t.Errorf("Acquire(%d) = %v, want ErrUnknownPriority", p, err)
		}
	}
	if s := r.Stats(); s.InFlight != 0 {
		t.Errorf("in flight %d after refusals", s.InFlight)
	}
}

// Each way of releasing a token gives the Algorithm what it says, and only
// the first release of a token (or of any copy of it) counts.
func TestTokenReleasesOnceWithItsSample(t *testing.T) {
	for _, tc := range []struct {
		name        string
		release     func(Token)
		wantSamples []Sample
	}{
		{"success", Token.Success, []Sample{{RTT: 30 * time.Millisecond, InFlight: 2, At: limEpoch.Add(30 * time.Millisecond)}}},
		{"dropped", Token.Dropped, []Sample{{RTT: 30 * time.Millisecond, InFlight: 2, Dropped: true, At: limEpoch.Add(30 * time.Millisecond)}}},
		{"ignore", Token.Ignore, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 4, LimiterOptions{})
			first := r.fill(t, 1)[0]
			tok := r.fill(t, 1)[0]
			r.clock.Advance(30 * time.Millisecond)
			tc.release(tok)
			copied := tok
			for _, again := range []func(){tok.Success, tok.Dropped, tok.Ignore, copied.Success, Token{}.Success} {
				again()
			}
			if s := r.Stats(); s.InFlight != 1 {
				t.Fatalf("in flight %d after releasing one of two tokens (and again), want 1", s.InFlight)
			}
			if len(r.alg.samples) != len(tc.wantSamples) || (len(tc.wantSamples) == 1 && r.alg.samples[0] != tc.wantSamples[0]) {
				t.Fatalf("samples %+v, want %+v", r.alg.samples, tc.wantSamples)
			}
			// The record is reused for the next token; the stale copy must
			// not release it.
			next := r.fill(t, 1)[0]
			tok.Success()
			if s := r.Stats(); s.InFlight != 2 {
				t.Fatalf("a stale token released a live one: in flight %d, want 2", s.InFlight)
			}
			next.Ignore()
			first.Ignore()
		})
	}
}

func TestRetryAfter(t *testing.T) {
	r := newRig(t, 4, LimiterOptions{})
	toks := r.fill(t, 4)
	_, err := r.Acquire(t.Context(), Critical)
	if got := RetryAfter(err); shedReason(t, err) != ShedAtLimit || got != time.Second {
		t.Errorf("before any sample: RetryAfter(%v) = %s, want 1s", err, got)
	}
	r.clock.Advance(100 * time.Millisecond)
	toks[0].Success() // RTT 100ms
	toks[0] = r.fill(t, 1)[0]
	_, err = r.Acquire(t.Context(), Critical)
	if got, want := RetryAfter(err), 25*time.Millisecond; got != want {
		t.Errorf("RTT 100ms, limit 4: RetryAfter = %s, want %s (RTT/limit)", got, want)
	}
	wrapped := errors.Join(errors.New("proxy"), err)
	if got := RetryAfter(wrapped); got != 25*time.Millisecond {
		t.Errorf("RetryAfter of a wrapped shed = %s", got)
	}
	if got := RetryAfter(errors.New("other")); got != 0 {
		t.Errorf("RetryAfter of another error = %s, want 0", got)
	}
	if s := r.Stats(); s.RTT != 100*time.Millisecond {
		t.Errorf("Stats().RTT = %s, want 100ms", s.RTT)
	}
}

func TestAcquireWithAnEndedContextFails(t *testing.T) {
	r := newRig(t, 4, LimiterOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Acquire(ctx, Critical); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire(cancelled) = %v, want context.Canceled", err)
	}
}

func TestAcquireAllocatesNothing(t *testing.T) {
	r := newRig(t, 4, LimiterOptions{MaxQueue: 4, MaxWait: time.Second})
	ctx := t.Context()
	if n := testing.AllocsPerRun(1000, func() {
		tok, _ := r.TryAcquire(Default)
		tok.Success()
	}); n != 0 {
		t.Errorf("TryAcquire+Success: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		tok, _ := r.Acquire(ctx, Default)
		tok.Dropped()
	}); n != 0 {
		t.Errorf("Acquire+Dropped without waiting: %v allocations, want 0", n)
	}
	toks := r.fill(t, 4)
	if n := testing.AllocsPerRun(1000, func() { r.TryAcquire(Default) }); n != 0 {
		t.Errorf("a refused TryAcquire: %v allocations, want 0", n)
	}
	for _, tok := range toks {
		tok.Ignore()
	}
}

// Many goroutines acquiring and releasing at once, on the system clock:
// in-flight never exceeds the limit, and everything ends released.
func TestLimiterUnderConcurrency(t *testing.T) {
	const limit, workers, rounds = 8, 64, 200
	alg, _ := NewFixed(limit)
	l, err := NewLimiter(LimiterOptions{Algorithm: alg, MaxQueue: 16, MaxWait: time.Second, Order: LIFO,
		CoDel: CoDel{Target: 5 * time.Millisecond, Interval: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var holders atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				p := Priority((w + i) % numClasses)
				var tok Token
				var ok bool
				if i%2 == 0 {
					tok, ok = l.TryAcquire(p)
				} else {
					var err error
					tok, err = l.Acquire(t.Context(), p)
					if err != nil && !errors.Is(err, ErrShed) {
						t.Errorf("Acquire: %v", err)
					}
					ok = err == nil
				}
				if !ok {
					continue
				}
				if n := holders.Add(1); n > limit {
					t.Errorf("%d holders, limit %d", n, limit)
				}
				runtime.Gosched()
				holders.Add(-1)
				[]func(){tok.Success, tok.Dropped, tok.Ignore}[i%3]()
			}
		})
	}
	wg.Wait()
	s := l.Stats()
	if s.InFlight != 0 || s.Queued != 0 {
		t.Fatalf("stats %+v after every worker finished: want nothing in flight or queued", s)
	}
	var admitted uint64
	for _, n := range s.Admitted {
		admitted += n
	}
	if admitted == 0 {
		t.Fatal("nothing admitted")
	}
}

// In-flight never exceeds the limit in force when a request is admitted,
// whatever the sequence of acquisitions, releases and limit changes.
func TestInFlightNeverExceedsTheLimit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := newRig(t, rapid.IntRange(1, 20).Draw(t, "limit"), LimiterOptions{})
		var held []Token
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 3).Draw(t, "op"); {
			case op <= 1:
				p := rapid.SampledFrom([]Priority{Sheddable, Default, Critical}).Draw(t, "class")
				before := r.Stats()
				tok, ok := r.TryAcquire(p)
				after := r.Stats()
				if ok {
					held = append(held, tok)
					if after.InFlight > after.Limit {
						t.Fatalf("admitted %s to %d in flight over limit %d", p, after.InFlight, after.Limit)
					}
				} else if p == Critical && before.InFlight < before.Limit {
					t.Fatalf("critical refused at %d in flight under limit %d", before.InFlight, before.Limit)
				}
			case op == 2 && len(held) > 0:
				i := rapid.IntRange(0, len(held)-1).Draw(t, "release")
				r.alg.n = rapid.IntRange(1, 20).Draw(t, "new limit")
				held[i].Success()
				held = slices.Delete(held, i, i+1)
			default:
				r.clock.Advance(time.Millisecond)
			}
			if s := r.Stats(); s.InFlight != len(held) {
				t.Fatalf("Stats().InFlight %d, %d tokens held", s.InFlight, len(held))
			}
		}
	})
}

func BenchmarkTryAcquireSuccess(b *testing.B) {
	alg, _ := NewFixed(1 << 20)
	l, _ := NewLimiter(LimiterOptions{Algorithm: alg})
	b.ReportAllocs()
	for b.Loop() {
		tok, _ := l.TryAcquire(Default)
		tok.Success()
	}
}

func BenchmarkTryAcquireSuccessParallel(b *testing.B) {
	alg, _ := NewFixed(1 << 20)
	l, _ := NewLimiter(LimiterOptions{Algorithm: alg})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tok, _ := l.TryAcquire(Default)
			tok.Success()
		}
	})
}

// Acquire with contention: more goroutines than slots, so that part of
// the calls wait in the queue.
func BenchmarkAcquireContended(b *testing.B) {
	alg, _ := NewFixed(4)
	l, _ := NewLimiter(LimiterOptions{Algorithm: alg, MaxQueue: 1 << 10, MaxWait: time.Minute})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(4) // 4×GOMAXPROCS goroutines for 4 slots
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tok, err := l.Acquire(ctx, Default)
			if err != nil {
				b.Error(err)
				return
			}
			tok.Success()
		}
	})
}

// The refusal at the limit, which overload makes the common case.
func BenchmarkTryAcquireRefused(b *testing.B) {
	alg, _ := NewFixed(1)
	l, _ := NewLimiter(LimiterOptions{Algorithm: alg})
	held, _ := l.TryAcquire(Critical)
	defer held.Ignore()
	b.ReportAllocs()
	for b.Loop() {
		l.TryAcquire(Sheddable)
	}
}

func TestParseOrder(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Order
		ok   bool
	}{{"fifo", FIFO, true}, {"LIFO", LIFO, true}, {"Lifo", LIFO, true}, {"", FIFO, false}, {"stack", FIFO, false}} {
		if got, ok := ParseOrder(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("ParseOrder(%q) = %s, %v; want %s, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestShedErrorSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		err   ShedError
		label string
		want  string
	}{
		{ShedError{Sheddable, ShedQueueFull, 25 * time.Millisecond}, "queue_full", "adaptive: sheddable request shed: queue full (retry after 25ms)"},
		{ShedError{Critical, ShedDisplaced, time.Second}, "displaced", "adaptive: critical request shed: displaced from the queue by a higher class (retry after 1s)"},
		{ShedError{Default, numReasons, time.Second}, "unknown", "adaptive: default request shed: for an unknown reason (retry after 1s)"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		if got := tc.err.Reason.String(); got != tc.label {
			t.Errorf("%d.String() = %q, want %q", tc.err.Reason, got, tc.label)
		}
	}
}
