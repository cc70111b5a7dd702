package engine_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/internal/testkit"
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
		resp, err := e.Decide(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Release()
	}
}

// A decision allocates what it must (the state keys, the store's batch)
// and not a copy of every limit's status per step: the items' statuses
// become the response's Limits, groups are built in a buffer on the stack,
// and a released response's memory serves the next decision. The bound is
// the count measured when this was written (10 before responses were
// released); a change that raises it should say why.
func TestDecideAllocations(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("the race detector's sync.Pool drops released memory at random")
	}
	e, clock := newEngine(t, apiPolicy)
	req := engine.Request{Domain: "api", Descriptors: []engine.Descriptor{desc("tenant", "acme")}}
	decide := func() {
		clock.Advance(1 << 30)
		resp, err := e.Decide(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Release()
	}
	const most = 6
	if n := testing.AllocsPerRun(100, decide); n > most {
		t.Errorf("Decide of a descriptor with two limits in memory: %v allocations, want at most %d", n, most)
	}
}

// A response's memory is reused only once it is released: a response kept
// stays as it was however many decisions follow, and one decided in
// released memory is whole.
func TestResponsesShareNoMemoryUntilReleased(t *testing.T) {
	e, _ := newEngine(t, apiPolicy)
	decide := func(tenant string) engine.Response {
		t.Helper()
		resp, err := e.Decide(ctx, engine.Request{Domain: "api", Descriptors: []engine.Descriptor{desc("tenant", tenant)}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	keysOf := func(resp engine.Response) []string {
		var keys []string
		for _, ds := range resp.Descriptors {
			for _, ls := range ds.Limits {
				keys = append(keys, ls.Key)
			}
		}
		return keys
	}
	kept := decide("kept")
	want := keysOf(kept)
	if len(want) != 2 {
		t.Fatalf("keys %q, want the two limits' keys", want)
	}
	for i := range 100 {
		other := decide(fmt.Sprint("t", i))
		for _, k := range keysOf(other) {
			if !strings.Contains(k, fmt.Sprint("t", i)) {
				t.Fatalf("decision %d answered key %q", i, k)
			}
		}
		other.Release()
		if got := keysOf(kept); !slices.Equal(got, want) {
			t.Fatalf("after %d more decisions the kept response's keys are %q, want %q", i+1, got, want)
		}
	}
	kept.Release()
	if kept.Descriptors != nil {
		t.Errorf("a released response still has its descriptors")
	}
}
