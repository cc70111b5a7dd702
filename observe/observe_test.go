package observe_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
)

// recorder records what it is told, in order, tagged with its name.
type recorder struct {
	name string
	log  *[]string
}

func (r recorder) Observe(_ context.Context, e observe.Event) {
	*r.log = append(*r.log, r.name+":observe:"+e.Key)
}

// spanner is a recorder that also sees requests begin and end.
type spanner struct{ recorder }

type depthKey struct{}

func (s spanner) Begin(ctx context.Context, surface, policy string) context.Context {
	*s.log = append(*s.log, s.name+":begin:"+policy)
	return context.WithValue(ctx, depthKey{}, s.name)
}

func (s spanner) End(ctx context.Context, sum observe.Summary) {
	*s.log = append(*s.log, s.name+":end:"+sum.Outcome.String()+":"+ctx.Value(depthKey{}).(string))
}

func TestMultiTellsEveryObserverInOrder(t *testing.T) {
	var log []string
	a, b := recorder{"a", &log}, spanner{recorder{"b", &log}}
	c := spanner{recorder{"c", &log}}
	o := observe.Multi(a, nil, observe.Multi(b, c))
	ctx := observe.Begin(context.Background(), o, observe.SurfaceServe, "api")
	o.Observe(ctx, observe.Event{Key: "k"})
	observe.End(ctx, o, observe.Summary{Outcome: observe.Denied})
	want := []string{
		"b:begin:api", "c:begin:api",
		"a:observe:k", "b:observe:k", "c:observe:k",
		"c:end:denied:c", "b:end:denied:c", // inside out; the context is the innermost's
	}
	if !slices.Equal(log, want) {
		t.Fatalf("calls:\n got %q\nwant %q", log, want)
	}
}

func TestMultiOfPlainObserversIsNoSpanner(t *testing.T) {
	var log []string
	o := observe.Multi(recorder{"a", &log}, recorder{"b", &log})
	if _, ok := o.(observe.Spanner); ok {
		t.Fatal("a Multi of plain observers claims to be a Spanner")
	}
	ctx := context.Background()
	if got := observe.Begin(ctx, o, "s", "p"); got != ctx {
		t.Fatal("Begin on a plain observer changed the context")
	}
	observe.End(ctx, o, observe.Summary{}) // no-op, no panic
	observe.End(ctx, nil, observe.Summary{})
}

func TestMultiOfNothingIsNil(t *testing.T) {
	if o := observe.Multi(); o != nil {
		t.Fatalf("Multi() = %v, want nil", o)
	}
	if o := observe.Multi(nil, observe.Multi(nil)); o != nil {
		t.Fatalf("Multi(nil, Multi(nil)) = %v, want nil", o)
	}
	one := recorder{"a", new([]string)}
	if o := observe.Multi(nil, one); o != observe.Observer(one) {
		t.Fatalf("Multi of one observer = %v, want it unwrapped", o)
	}
}

func TestUsed(t *testing.T) {
	for _, tc := range []struct {
		limit, remaining int64
		want             float64
	}{
		{100, 100, 0},
		{100, 20, 0.8},
		{100, 0, 1},
		{100, -5, 1},  // debt counts as all used
		{100, 150, 0}, // a remaining above the limit is clamped
		{0, 0, 0},     // unknown limit
	} {
		e := observe.Event{Decision: floodgate.Decision{Limit: tc.limit, Remaining: tc.remaining}}
		if got := e.Used(); got != tc.want {
			t.Errorf("Used(limit %d, remaining %d) = %v, want %v", tc.limit, tc.remaining, got, tc.want)
		}
	}
}

func TestOutcomeNames(t *testing.T) {
	want := []string{"allowed", "denied", "shadow_denied", "shed", "error"}
	var got []string
	for _, o := range observe.Outcomes() {
		got = append(got, o.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("names %q, want %q", got, want)
	}
	if s := observe.Outcome(0).String(); s != "unknown" {
		t.Fatalf("zero outcome = %q", s)
	}
}

func TestNotesCarryTheDegradedCause(t *testing.T) {
	cause := errors.New("redis: connection refused")
	observe.NoteDegraded(context.Background(), cause) // no notes: nothing happens

	var n observe.Notes
	ctx := observe.WithNotes(context.Background(), &n)
	if d, _ := n.Degraded(); d {
		t.Fatal("fresh notes say degraded")
	}
	observe.NoteDegraded(ctx, cause)
	if d, err := n.Degraded(); !d || !errors.Is(err, cause) {
		t.Fatalf("Degraded() = %v, %v; want true, %v", d, err, cause)
	}
	n.Reset()
	if d, err := n.Degraded(); d || err != nil {
		t.Fatalf("after Reset: %v, %v", d, err)
	}
}

func TestNotesContextNeedsNoAllocation(t *testing.T) {
	type parentKey struct{}
	parent := context.WithValue(context.Background(), parentKey{}, "v")
	nc := &observe.NotesContext{Context: parent}
	if observe.NotesFrom(nc) != &nc.Notes {
		t.Fatal("NotesFrom does not find the NotesContext's notes")
	}
	if nc.Value(parentKey{}) != "v" {
		t.Fatal("NotesContext hides its parent's values")
	}
	allocs := testing.AllocsPerRun(100, func() {
		nc.Notes.Reset()
		observe.NoteDegraded(nc, nil)
		if d, _ := nc.Notes.Degraded(); !d {
			t.Fatal("not degraded")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request", allocs)
	}
}
