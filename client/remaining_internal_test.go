package client

import (
	"testing"
	"time"
)

// leastRemaining reads the binding item of a RateLimit field without
// parsing it, and is not fooled by a quoted name.
func TestLeastRemaining(t *testing.T) {
	for _, tc := range []struct {
		field string
		r     int64
		t     time.Duration
	}{
		{``, -1, 0},
		{`"api";r=42;t=17`, 42, 17 * time.Second},
		{`"burst";r=7;t=1, "day";r=400;t=50000`, 7, time.Second},
		{`"day";t=50000;r=400, "burst"; r=7; t=1`, 7, time.Second},
		{`"a;r=0;t=9";r=5;t=2`, 5, 2 * time.Second},
		{`"q\";r=0";r=6;t=3`, 6, 3 * time.Second},
		{`api;r=;t=4, b;r=-1;t=2, c;r=8`, 8, 0},
	} {
		if r, reset := leastRemaining(tc.field); r != tc.r || reset != tc.t {
			t.Errorf("leastRemaining(%q) = %d, %v; want %d, %v", tc.field, r, reset, tc.r, tc.t)
		}
	}
}
