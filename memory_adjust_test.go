package floodgate_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

// The case the Adjuster exists for: a tokens-per-minute limit, a request
// that reserves an estimate and a response that reports the real count.
func ExampleMemory_Adjust() {
	// A manual clock keeps the output stable (a real minute could end between
	// the calls); use floodgate.NewMemory() in production.
	m := floodgate.NewMemory(floodgate.WithClock(floodgate.NewManualClock(time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC))))
	tpm := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10_000, Period: time.Minute}
	d, _ := m.AllowN(ctx, "tenant:7", tpm, 1_000) // reserve the estimate
	fmt.Println("reserved, remaining", d.Remaining)
	_ = m.Adjust(ctx, "tenant:7", tpm, 3_412-1_000) // the response used 3,412 tokens
	d, _ = m.AllowN(ctx, "tenant:7", tpm, 0)
	fmt.Println("reconciled, remaining", d.Remaining)
	// Output:
	// reserved, remaining 9000
	// reconciled, remaining 6588
}

// Every algorithm: a charge takes from Remaining, past the limit if it must,
// and the refund of the same amount at the same instant gives it back.
func TestAdjustChargesAndRefunds(t *testing.T) {
	for _, a := range floodgate.Algorithms() {
		for _, tc := range []struct {
			name          string
			reserve       int64
			delta         int64
			wantRemaining int64 // of a limit of 10
		}{
			{"actual above the estimate", 4, 3, 3},
			{"actual below the estimate", 4, -3, 9},
			{"actual far above: the key is in debt", 4, 25, 0},
			{"a refund larger than the reservation stops at empty", 4, -25, 10},
			{"no reservation, then a charge", 0, 6, 4},
		} {
			t.Run(string(a)+"/"+tc.name, func(t *testing.T) {
				m, _ := newVirtual()
				limit := floodgate.Limit{Algorithm: a, Rate: 10, Period: time.Second}
				if tc.reserve > 0 {
					if d, err := m.AllowN(ctx, "k", limit, tc.reserve); err != nil || !d.Allowed {
						t.Fatalf("reservation: %+v, %v", d, err)
					}
				}
				before, _ := m.AllowN(ctx, "k", limit, 0)
				if err := m.Adjust(ctx, "k", limit, tc.delta); err != nil {
					t.Fatal(err)
				}
				if d, _ := m.AllowN(ctx, "k", limit, 0); d.Remaining != tc.wantRemaining {
					t.Fatalf("Remaining %d after adjusting by %d, want %d", d.Remaining, tc.delta, tc.wantRemaining)
				}
				if tc.delta > 0 && tc.delta <= before.Remaining {
					if err := m.Adjust(ctx, "k", limit, -tc.delta); err != nil {
						t.Fatal(err)
					}
					if d, _ := m.AllowN(ctx, "k", limit, 0); d != before {
						t.Fatalf("charge and refund of %d: %+v, want %+v", tc.delta, d, before)
					}
				}
			})
		}
	}
}

// A charge past the limit makes the requests after it wait, and RetryAfter
// says for how long.
func TestDebtDelaysTheNextRequest(t *testing.T) {
	for _, a := range floodgate.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			m, clk := newVirtual()
			limit := floodgate.Limit{Algorithm: a, Rate: 10, Period: time.Second}
			if err := m.Adjust(ctx, "k", limit, 12); err != nil {
				t.Fatal(err)
			}
			d, _ := m.AllowN(ctx, "k", limit, 1)
			if d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("a request right after the debt: %+v", d)
			}
			clk.Advance(d.RetryAfter)
			if d, _ := m.AllowN(ctx, "k", limit, 1); !d.Allowed {
				t.Fatalf("denied after RetryAfter: %+v", d)
			}
		})
	}
}

// A refund to a key that holds nothing stores nothing; a charge creates it.
func TestAdjustOnAnUnknownKey(t *testing.T) {
	for _, opts := range [][]floodgate.MemoryOption{nil, {floodgate.WithMaxKeys(100)}} {
		m, _ := newVirtual(opts...)
		limit := floodgate.PerSecond(10)
		if err := m.Adjust(ctx, "k", limit, -5); err != nil || m.Len() != 0 {
			t.Fatalf("refund to an unknown key: %v, %d keys held", err, m.Len())
		}
		if err := m.Adjust(ctx, "k", limit, 5); err != nil || m.Len() != 1 {
			t.Fatalf("charge to an unknown key: %v, %d keys held", err, m.Len())
		}
		if d, _ := m.AllowN(ctx, "k", limit, 0); d.Remaining != 5 {
			t.Fatalf("Remaining %d after a charge of 5 out of 10", d.Remaining)
		}
	}
}

// Adjust under another limit moves the key as AllowN does: the same
// algorithm keeps the count, another one starts afresh.
func TestAdjustUnderAnotherLimit(t *testing.T) {
	m, _ := newVirtual()
	ten := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: time.Minute}
	twenty := ten
	twenty.Rate = 20
	m.AllowN(ctx, "k", ten, 4)
	if err := m.Adjust(ctx, "k", twenty, 2); err != nil {
		t.Fatal(err)
	}
	if d, _ := m.AllowN(ctx, "k", twenty, 0); d.Remaining != 14 {
		t.Fatalf("Remaining %d of 20 after 4 and 2, want 14", d.Remaining)
	}
	if err := m.Adjust(ctx, "k", ten.WithAlgorithm(floodgate.SlidingLog), -1); err != nil {
		t.Fatal(err)
	}
	if d, _ := m.AllowN(ctx, "k", ten.WithAlgorithm(floodgate.SlidingLog), 0); d.Remaining != 10 {
		t.Fatalf("Remaining %d under a new algorithm, want a fresh 10", d.Remaining)
	}
}

func TestAdjustBadInput(t *testing.T) {
	ok := floodgate.PerSecond(10)
	for _, tc := range []struct {
		name  string
		key   string
		limit floodgate.Limit
		delta int64
		want  error
	}{
		{"empty key", "", ok, 1, floodgate.ErrInvalidKey},
		{"charge beyond the maximum", "k", ok, floodgate.MaxAdjustment + 1, floodgate.ErrInvalidCost},
		{"refund beyond the maximum", "k", ok, -floodgate.MaxAdjustment - 1, floodgate.ErrInvalidCost},
		{"bad limit on a charge", "k", floodgate.PerSecond(0), 1, floodgate.ErrInvalidLimit},
		{"bad limit on a refund to an unknown key", "k", floodgate.PerSecond(-1), -1, floodgate.ErrInvalidLimit},
		{"bad limit on an adjustment of 0", "k", ok.WithAlgorithm("gcra"), 0, floodgate.ErrInvalidLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newVirtual()
			if err := m.Adjust(ctx, tc.key, tc.limit, tc.delta); !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want one wrapping %v", err, tc.want)
			}
			if err := floodgate.ValidateAdjustment(tc.key, tc.delta); tc.want != floodgate.ErrInvalidLimit && !errors.Is(err, tc.want) {
				t.Fatalf("ValidateAdjustment: %v, want one wrapping %v", err, tc.want)
			}
			if m.Len() != 0 {
				t.Fatalf("bad input stored %d keys", m.Len())
			}
		})
	}
	m, _ := newVirtual()
	if err := m.Adjust(ctx, "k", ok, floodgate.MaxAdjustment); err != nil {
		t.Fatalf("the largest charge: %v", err)
	}
	if err := m.Adjust(ctx, "k", ok, -floodgate.MaxAdjustment); err != nil {
		t.Fatalf("the largest refund: %v", err)
	}
}

// An adjustment of an existing key costs no allocation, bounded or not.
func TestAdjustDoesNotAllocate(t *testing.T) {
	for _, opts := range [][]floodgate.MemoryOption{nil, {floodgate.WithMaxKeys(1000)}} {
		for _, a := range floodgate.Algorithms() {
			m, _ := newVirtual(opts...)
			limit := floodgate.Limit{Algorithm: a, Rate: 1_000_000, Period: time.Second}
			m.AllowN(ctx, "k", limit, 10)
			delta := int64(1)
			if n := testing.AllocsPerRun(100, func() {
				m.Adjust(ctx, "k", limit, delta)
				delta = -delta
			}); n != 0 {
				t.Errorf("%s (max keys %v): %v allocations per Adjust", a, opts != nil, n)
			}
		}
	}
}

// Charges and refunds from many goroutines on one key lose no update.
func TestConcurrentAdjustmentsLoseNoUpdate(t *testing.T) {
	for _, opts := range [][]floodgate.MemoryOption{nil, {floodgate.WithMaxKeys(100)}} {
		m, _ := newVirtual(opts...)
		limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1_000_000, Period: time.Hour}
		const workers, rounds = 8, 200
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range rounds {
					m.AllowN(ctx, "k", limit, 1)
					m.Adjust(ctx, "k", limit, 3)
					m.Adjust(ctx, "k", limit, -1)
				}
			})
		}
		wg.Wait()
		if d, _ := m.AllowN(ctx, "k", limit, 0); d.Remaining != limit.Rate-3*workers*rounds {
			t.Fatalf("Remaining %d, want %d", d.Remaining, limit.Rate-3*workers*rounds)
		}
	}
}

// Memory implements the Adjuster interface.
var _ floodgate.Adjuster = (*floodgate.Memory)(nil)

// BenchmarkAdjust measures an adjustment of an existing key beside the
// decision it corrects.
func BenchmarkAdjust(b *testing.B) {
	m := floodgate.NewMemory()
	m.AllowN(ctx, "user:42", benchLimit, 1)
	b.Run("Adjust", func(b *testing.B) {
		b.ReportAllocs()
		delta := int64(1)
		for b.Loop() {
			m.Adjust(ctx, "user:42", benchLimit, delta)
			delta = -delta
		}
	})
	b.Run("AllowN", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.AllowN(ctx, "user:42", benchLimit, 1)
		}
	})
}
