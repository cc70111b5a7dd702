package failover

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

// adjustingStore is the fake store with Adjust: it answers as the fake's
// mode says and, when it succeeds, adds delta to its tally.
type adjustingStore struct {
	*fakeStore
	tally atomic.Int64
}

func newAdjustingStore(b behaviour) *adjustingStore { return &adjustingStore{fakeStore: newFake(b)} }

func (s *adjustingStore) Adjust(ctx context.Context, _ string, _ floodgate.Limit, delta int64) error {
	if err := s.answer(ctx); err != nil {
		return err
	}
	s.tally.Add(delta)
	return nil
}

var (
	_ floodgate.Adjuster     = adjusting{}
	_ floodgate.Adjuster     = batchingAdjusting{}
	_ floodgate.BatchLimiter = batching{}
	_ floodgate.BatchLimiter = batchingAdjusting{}
)

// singleAdjusting adjusts but decides one request at a time: no AllowAll.
type singleAdjusting struct{ s *adjustingStore }

func (a singleAdjusting) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	return a.s.AllowN(ctx, key, limit, cost)
}

func (a singleAdjusting) Adjust(ctx context.Context, key string, limit floodgate.Limit, delta int64) error {
	return a.s.Adjust(ctx, key, limit, delta)
}

var minute = floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: time.Minute}

// A healthy store takes every adjustment, under every policy.
func TestAdjustGoesToTheStore(t *testing.T) {
	for _, mode := range Modes() {
		t.Run(string(mode), func(t *testing.T) {
			store := newAdjustingStore(succeed)
			l, _ := newLimiter(t, store, Config{Mode: mode})
			for _, delta := range []int64{5, -2, 0} {
				if err := l.adjust(context.Background(), "k", minute, delta); err != nil {
					t.Fatalf("Adjust(%d): %v", delta, err)
				}
			}
			if got := store.tally.Load(); got != 3 {
				t.Fatalf("the store was adjusted by %d in all, want 3", got)
			}
		})
	}
}

// With the store down, FailLocal adjusts the local count that decides, under
// the node's share of the limit; the other policies report the store
// unavailable, whether the store failed or the breaker skipped it.
func TestAdjustWhileTheStoreIsDown(t *testing.T) {
	for _, tc := range []struct {
		mode    Mode
		wantErr bool
	}{
		{FailLocal, false},
		{FailOpen, true},
		{FailClosed, true},
	} {
		for _, breakerOpen := range []bool{false, true} {
			name := string(tc.mode) + "/store failing"
			if breakerOpen {
				name = string(tc.mode) + "/breaker open"
			}
			t.Run(name, func(t *testing.T) {
				store := newAdjustingStore(succeed)
				l, _ := newLimiter(t, store, Config{Mode: tc.mode, Nodes: 2})
				if breakerOpen {
					openBreaker(t, l, store.fakeStore)
				}
				store.set(failUnavailable)
				decide(t, l, "k", minute, 1) // local share: 5 a minute, 1 taken
				err := l.adjust(context.Background(), "k", minute, 2)
				if tc.wantErr != (err != nil) || (err != nil && !errors.Is(err, floodgate.ErrStoreUnavailable)) {
					t.Fatalf("error %v; want one wrapping ErrStoreUnavailable: %v", err, tc.wantErr)
				}
				if store.tally.Load() != 0 {
					t.Fatal("a failing store recorded the adjustment")
				}
				if tc.mode == FailLocal {
					if r := decide(t, l, "k", minute, 0); !r.degraded() || r.Remaining != 2 {
						t.Fatalf("local decision after charging 2: %+v, want Remaining 2 of a share of 5", r)
					}
				}
			})
		}
	}
}

// Adjustments go through the breaker like decisions: store failures count
// towards opening it, and an open breaker spares the store.
func TestAdjustUsesTheBreaker(t *testing.T) {
	store := newAdjustingStore(failUnavailable)
	l, _ := newLimiter(t, store, Config{Mode: FailClosed})
	for range threshold {
		l.adjust(context.Background(), "k", minute, 1)
	}
	if l.State() != Open || l.Stats().StoreErrors != threshold {
		t.Fatalf("after %d failed adjustments: breaker %v, %+v", threshold, l.State(), l.Stats())
	}
	calls := store.calls.Load()
	if err := l.adjust(context.Background(), "k", minute, 1); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("with the breaker open: %v, want ErrBreakerOpen", err)
	}
	if store.calls.Load() != calls {
		t.Fatal("the open breaker let an adjustment through to the store")
	}
}

func TestAdjustErrorsThatAreNotOutages(t *testing.T) {
	ok := context.Background()
	cancelled, cancel := context.WithCancel(ok)
	cancel()
	for _, tc := range []struct {
		name  string
		store floodgate.Limiter
		ctx   context.Context
		key   string
		limit floodgate.Limit
		delta int64
		want  error
	}{
		{"the store rejects the limit", newAdjustingStore(badLimit), ok, "k", minute, 1, floodgate.ErrInvalidLimit},
		{"the caller gave up", newAdjustingStore(succeed), cancelled, "k", minute, 1, context.Canceled},
		{"empty key, store down", newAdjustingStore(failUnavailable), ok, "", minute, 1, floodgate.ErrInvalidKey},
		{"bad delta, store down", newAdjustingStore(failUnavailable), ok, "k", minute, -floodgate.MaxAdjustment - 1, floodgate.ErrInvalidCost},
		{"bad limit, store down", newAdjustingStore(failUnavailable), ok, "k", floodgate.PerSecond(0), 1, floodgate.ErrInvalidLimit},
	} {
		for _, mode := range Modes() {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				l, _ := newLimiter(t, tc.store, Config{Mode: mode})
				err := l.adjust(tc.ctx, tc.key, tc.limit, tc.delta)
				if !errors.Is(err, tc.want) || errors.Is(err, floodgate.ErrStoreUnavailable) {
					t.Fatalf("error %v, want one wrapping %v and not ErrStoreUnavailable", err, tc.want)
				}
			})
		}
	}
}

// Over a real Memory as the store, the decorator adds nothing: adjusting
// through it is adjusting the store.
func TestAdjustThroughToAMemory(t *testing.T) {
	store := floodgate.NewMemory(floodgate.WithClock(floodgate.NewManualClock(epoch)))
	l, _ := newLimiter(t, store, Config{Mode: FailLocal})
	decide(t, l, "k", minute, 4)
	if err := l.adjust(context.Background(), "k", minute, -3); err != nil {
		t.Fatal(err)
	}
	if d, _ := store.AllowN(context.Background(), "k", minute, 0); d.Remaining != 9 {
		t.Fatalf("the store's Remaining is %d after 4 taken and 3 refunded, want 9", d.Remaining)
	}
}
