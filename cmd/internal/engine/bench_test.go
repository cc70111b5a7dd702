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

// A decision allocates what it must (the state keys, the response, the
// store's batch) and not a copy of every limit's status per step: the
// items' statuses become the response's Limits, and groups are built in a
// buffer on the stack. The bound is the count measured when this was
// written; a change that raises it should say why.
func TestDecideAllocations(t *testing.T) {
	e, clock := newEngine(t, apiPolicy)
	req := engine.Request{Domain: "api", Descriptors: []engine.Descriptor{desc("tenant", "acme")}}
	decide := func() {
		clock.Advance(1 << 30)
		if _, err := e.Decide(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	const most = 10
	if n := testing.AllocsPerRun(100, decide); n > most {
		t.Errorf("Decide of a descriptor with two limits in memory: %v allocations, want at most %d", n, most)
	}
}
