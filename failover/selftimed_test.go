package failover

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

// selfTimed is a store that bounds its calls itself (SelfTimed) and
// records the context each call gets.
type selfTimed struct {
	*fakeStore
	timeout time.Duration
	got     chan context.Context
}

func (s selfTimed) CallTimeout() time.Duration { return s.timeout }

func (s selfTimed) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	s.got <- ctx
	return s.fakeStore.AllowN(ctx, key, limit, cost)
}

// A store that keeps a bound no longer than the policy's Timeout gets the
// caller's context as it is; one whose bound is longer, or unknown, gets a
// context with the policy's deadline.
func TestSelfTimedStoreGetsCallersContext(t *testing.T) {
	const timeout = time.Second
	type key struct{}
	for _, tc := range []struct {
		name      string
		own       time.Duration
		asItIs    bool
		wantBound bool
	}{
		{"shorter bound", timeout / 2, true, false},
		{"same bound", timeout, true, false},
		{"longer bound", 2 * timeout, false, true},
		{"no bound", 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := selfTimed{newFake(succeed), tc.own, make(chan context.Context, 1)}
			defer close(s.release)
			l, _ := newLimiter(t, s, Config{Mode: FailClosed, Timeout: timeout})
			caller := context.WithValue(context.Background(), key{}, "caller")
			if r, err := l.decide(caller, "k", floodgate.PerSecond(100), 1); err != nil || r.degraded() || !r.Allowed {
				t.Fatalf("decide = %+v, %v; want allowed by the store", r, err)
			}
			got := <-s.got
			if (got == caller) != tc.asItIs {
				t.Errorf("store got the caller's context as it is: %v, want %v", got == caller, tc.asItIs)
			}
			if got.Value(key{}) != "caller" {
				t.Errorf("the store's context does not carry the caller's values")
			}
			if _, bounded := got.Deadline(); bounded != tc.wantBound {
				t.Errorf("store's context has a deadline: %v, want %v", bounded, tc.wantBound)
			}
		})
	}
}

// answerStore answers every call with the same decision, allocating
// nothing, and bounds its calls itself.
type answerStore struct{ timeout time.Duration }

func (s answerStore) CallTimeout() time.Duration { return s.timeout }

func (answerStore) AllowN(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
	return answered, nil
}

// A decision through a store that bounds its own calls allocates nothing
// in the policy: it is on the path of every request a service serves.
func TestSelfTimedDecisionAllocatesNothing(t *testing.T) {
	l, _ := newLimiter(t, answerStore{timeout: time.Second}, Config{Mode: FailClosed, Timeout: time.Second})
	ctx, limit := context.Background(), floodgate.PerSecond(100)
	if n := testing.AllocsPerRun(1000, func() {
		if d, err := l.AllowN(ctx, "k", limit, 1); err != nil || d != answered {
			t.Fatalf("AllowN = %+v, %v; want the store's answer", d, err)
		}
	}); n != 0 {
		t.Errorf("a decision allocates %.1f times, want 0", n)
	}
}
