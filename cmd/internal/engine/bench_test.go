package engine_test

import (
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/engine"
)

// BenchmarkDecideTwoLimits decides a descriptor with a burst and a
// sustained limit (one group, all or nothing) in memory.
//
//	go test -run '^$' -bench DecideTwoLimits -benchmem ./cmd/internal/engine
func BenchmarkDecideTwoLimits(b *testing.B) {
	e, clock := newEngine(b, apiPolicy)
	req := engine.Request{Domain: "api", Descriptors: []engine.Descriptor{desc("tenant", "acme")}}
	b.ReportAllocs()
	for b.Loop() {
		clock.Advance(1 << 30) // a full bucket each time: the decision, not the denial
		if _, err := e.Decide(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
