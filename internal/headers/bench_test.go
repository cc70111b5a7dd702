package headers

import (
	"testing"
	"time"
)

// The fields of a response with two limits, as the service writes them for
// every Envoy answer: each value costs one allocation, its string.
func BenchmarkFieldValues(b *testing.B) {
	qs := []Quota{
		{Name: "api.user", Quota: 100, Window: time.Minute, Remaining: 42, Reset: 17 * time.Second},
		{Name: "api.tenant_acme.tpm", Quota: 90000, Window: time.Minute, Remaining: 81234, Reset: 17 * time.Second},
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = PolicyValue(qs)
		_ = LimitValue(qs)
	}
}

func TestFieldValuesAllocateOnlyTheirStrings(t *testing.T) {
	qs := []Quota{
		{Name: "api.user", Quota: 100, Window: time.Minute, Remaining: 42, Reset: 17 * time.Second},
		{Name: "api.tenant_acme.tpm", Quota: 90000, Window: time.Minute, Remaining: 81234, Reset: 17 * time.Second},
	}
	if n := testing.AllocsPerRun(100, func() { _ = PolicyValue(qs); _ = LimitValue(qs) }); n > 2 {
		t.Fatalf("%.0f allocations for two field values, want 2 (their strings)", n)
	}
}
