package engine_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
)

// keysPolicy adds a per-address limit and a two-level one to the example
// API, for the key-size policy's cases.
const keysPolicy = servicetest.APIPolicy + `  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: hour, requests_per_unit: 1000}
`

func newKeysEngine(t testing.TB) (*engine.Engine, *floodgate.Memory) {
	t.Helper()
	store := floodgate.NewMemory()
	return engine.New(servicetest.Policies(t, keysPolicy), engine.OneStore{Limiter: store}), store
}

// maxErrorBytes bounds the text of a refusal: it quotes an excerpt of the
// input, never the input.
const maxErrorBytes = 300

// The key-size policy on descriptors: each entry's key and value at most
// floodgate.MaxValueBytes, the domain too, and the key they compose at most
// floodgate.MaxKeyBytes. A refusal is a bad request, wraps
// floodgate.ErrKeyTooLong, says what was too long, and stores nothing.
func TestDescriptorKeyPolicy(t *testing.T) {
	long := strings.Repeat("v", floodgate.MaxValueBytes+1)
	slashes := strings.Repeat("/", floodgate.MaxValueBytes) // escaped to three times its length
	for _, tc := range []struct {
		name    string
		req     engine.Request
		refused string // what the error names; "" when the request passes
	}{
		{"a value at the maximum", engine.Request{Domain: "api",
			Descriptors: []engine.Descriptor{desc("remote_address", strings.Repeat("v", floodgate.MaxValueBytes))}}, ""},
		{"a value one byte over", engine.Request{Domain: "api",
			Descriptors: []engine.Descriptor{desc("remote_address", long)}}, "descriptor 0 entry 0: value"},
		{"a megabyte value", engine.Request{Domain: "api",
			Descriptors: []engine.Descriptor{desc("user", "ann"), desc("remote_address", strings.Repeat("v", 1<<20))}}, "descriptor 1 entry 0: value"},
		{"a long entry key", engine.Request{Domain: "api",
			Descriptors: []engine.Descriptor{desc("user", "ann", long, "x")}}, "descriptor 0 entry 1: key"},
		{"a long domain", engine.Request{Domain: long,
			Descriptors: []engine.Descriptor{desc("user", "ann")}}, "domain"},
		{"a composed key over the maximum", engine.Request{Domain: "api",
			Descriptors: []engine.Descriptor{desc("a", slashes, "b", slashes)}}, "descriptor 0: key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, store := newKeysEngine(t)
			_, err := e.Decide(ctx, tc.req)
			if tc.refused == "" {
				if err != nil || store.Len() != 1 {
					t.Fatalf("error %v and %d keys stored, want a decision and one key", err, store.Len())
				}
				return
			}
			switch {
			case !errors.Is(err, engine.ErrBadRequest) || !errors.Is(err, floodgate.ErrKeyTooLong):
				t.Fatalf("error %v, want a bad request wrapping floodgate.ErrKeyTooLong", err)
			case !strings.Contains(err.Error(), tc.refused):
				t.Fatalf("error %q does not name %q", err, tc.refused)
			case len(err.Error()) > maxErrorBytes:
				t.Fatalf("error of %d bytes echoes the input", len(err.Error()))
			case store.Len() != 0:
				t.Fatalf("a refused request left %d keys in the store", store.Len())
			}
		})
	}
}

// TestMegabyteValuesHoldNoMemory is the attack of issue 12: 1,000 requests
// with a distinct 1 MB remote_address each once grew the service by 1.5 GB,
// one key per request. Now every one is refused before it reaches the
// store: no key is held, and the live heap grows by far less than the
// gigabyte the keys would take (the allowance, 64 MB, covers the test's own
// garbage and the runtime's).
func TestMegabyteValuesHoldNoMemory(t *testing.T) {
	e, store := newKeysEngine(t)
	base := []byte(strings.Repeat("a", 1<<20))
	before := liveHeap()
	for i := range 1000 {
		base[i%len(base)] = 'b' // a distinct value each time
		req := engine.Request{Domain: "api", Descriptors: []engine.Descriptor{{Entries: []policy.Entry{
			{Key: "remote_address", Value: string(base)}}}}}
		if _, err := e.Decide(ctx, req); !errors.Is(err, floodgate.ErrKeyTooLong) {
			t.Fatalf("request %d: error %v, want one wrapping floodgate.ErrKeyTooLong", i, err)
		}
	}
	if n := store.Len(); n != 0 {
		t.Fatalf("the store holds %d keys, want none", n)
	}
	const allowance = 64 << 20
	if grew := int64(liveHeap()) - int64(before); grew > allowance {
		t.Fatalf("the live heap grew by %d MB, want at most %d MB", grew>>20, allowance>>20)
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Cost names come from the request too: a refusal quotes an excerpt of
// each, and at most a few of them.
func TestCostNameRefusalsStayShort(t *testing.T) {
	e, _ := newKeysEngine(t)
	many := map[string]int64{}
	for i := range 1000 {
		many[strings.Repeat("n", 1000)+string(rune('a'+i%26))+strings.Repeat("x", i)] = 1
	}
	for _, tc := range []struct {
		name  string
		req   engine.Request
		names string
	}{
		{"a megabyte name", engine.Request{Domain: "api", Costs: map[string]int64{strings.Repeat("n", 1<<20): -1},
			Descriptors: []engine.Descriptor{desc("user", "ann")}}, `"nnnn`},
		{"a thousand unknown names", engine.Request{Domain: "api",
			Descriptors: []engine.Descriptor{{Entries: desc("user", "ann").Entries, Costs: many}}}, "and 995 more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Decide(ctx, tc.req)
			switch {
			case !errors.Is(err, engine.ErrBadRequest):
				t.Fatalf("error %v, want a bad request", err)
			case len(err.Error()) > 2*maxErrorBytes:
				t.Fatalf("error of %d bytes echoes the input", len(err.Error()))
			case !strings.Contains(err.Error(), tc.names):
				t.Fatalf("error %q does not say %q", err, tc.names)
			}
		})
	}
}
