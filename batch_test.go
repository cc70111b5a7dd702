package floodgate_test

import (
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

func TestViolated(t *testing.T) {
	ok := floodgate.Decision{Allowed: true}
	cause := floodgate.Decision{RetryAfter: time.Second} // denied, and says why
	never := floodgate.Decision{RetryAfter: -1}          // denied: can never pass
	bystander := floodgate.Decision{}                    // denied with the batch, not its cause
	for _, tc := range []struct {
		name string
		ds   []floodgate.Decision
		want []bool
	}{
		{"all allowed", []floodgate.Decision{ok, ok}, []bool{false, false}},
		{"a batch marks its cause", []floodgate.Decision{bystander, cause, bystander}, []bool{false, true, false}},
		{"a cost that never passes is a cause", []floodgate.Decision{never, bystander}, []bool{true, false}},
		{"unmarked denials all count", []floodgate.Decision{ok, bystander, bystander}, []bool{false, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, d := range tc.ds {
				if got := floodgate.Violated(d, tc.ds); got != tc.want[i] {
					t.Errorf("decision %d: Violated = %v, want %v", i, got, tc.want[i])
				}
			}
		})
	}
}
