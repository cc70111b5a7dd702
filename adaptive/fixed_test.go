package adaptive

import (
	"errors"
	"testing"
	"time"
)

func TestFixed(t *testing.T) {
	f, err := NewFixed(7)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Sample{{RTT: time.Hour, Dropped: true}, {RTT: time.Nanosecond, InFlight: 7}} {
		if got := f.Update(s); got != 7 || f.Limit() != 7 {
			t.Fatalf("Update(%+v) = %d, Limit() = %d; want 7 whatever the sample", s, got, f.Limit())
		}
	}
}

func TestNewFixedRejectsLimitsBelowOne(t *testing.T) {
	for _, n := range []int{0, -1} {
		if _, err := NewFixed(n); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("NewFixed(%d) error = %v; want ErrInvalidOptions", n, err)
		}
	}
}
