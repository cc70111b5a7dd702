package experiments

import (
	"slices"
	"testing"
)

func TestWindowStats(t *testing.T) {
	times := []int64{0, 1, 5, 10, 10, 11, 25}
	tests := []struct {
		name string
		got  any
		want any
	}{
		// (t−10, t]: at 10 the window (0, 10] holds 1, 5, 10, 10.
		{"max in any period of 10", maxInAnyPeriod(times, 10), int64(4)},
		{"max in any period of 1", maxInAnyPeriod(times, 1), int64(2)},
		{"max in any period of 100", maxInAnyPeriod(times, 100), int64(7)},
		{"max of nothing", maxInAnyPeriod(nil, 10), int64(0)},
		{"per aligned window of 10", perWindow(times, 0, 10, 3), []int64{3, 3, 1}},
		{"per window from 5", perWindow(times, 5, 10, 1), []int64{4}},
		{"trailing at 0, 10, 20, 30", trailingCounts(times, []int64{0, 10, 20, 30}, 10), []int64{1, 4, 1, 1}},
	}
	for _, tt := range tests {
		switch want := tt.want.(type) {
		case int64:
			if tt.got != want {
				t.Errorf("%s = %v, want %v", tt.name, tt.got, want)
			}
		case []int64:
			if !slices.Equal(tt.got.([]int64), want) {
				t.Errorf("%s = %v, want %v", tt.name, tt.got, want)
			}
		}
	}
}
