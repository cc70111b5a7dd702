package failover

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

// pingStore is a fake store that is also a Pinger; pings behave as the
// fake's decisions do.
type pingStore struct{ *fakeStore }

func (p pingStore) Ping(ctx context.Context) error { return p.answer(ctx) }

func TestProbe(t *testing.T) {
	type step struct {
		store     behaviour
		advance   time.Duration
		wantCall  bool  // the probe asked the store
		wantErr   error // every failure wraps floodgate.ErrStoreUnavailable
		wantState BreakerState
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"cooling down asks nothing", []step{
			{store: succeed, advance: coolDown - time.Microsecond, wantErr: floodgate.ErrStoreUnavailable, wantState: Open},
		}},
		{"an answer closes the breaker without a decision", []step{
			{store: succeed, advance: coolDown, wantCall: true, wantState: Closed},
			{store: failUnavailable, wantState: Closed},
		}},
		{"a failed ping opens it for another cool-down", []step{
			{store: failNet, advance: coolDown, wantCall: true, wantErr: floodgate.ErrStoreUnavailable, wantState: Open},
			{store: succeed, advance: coolDown - time.Microsecond, wantErr: floodgate.ErrStoreUnavailable, wantState: Open},
			{store: succeed, advance: time.Microsecond, wantCall: true, wantState: Closed},
		}},
		{"a ping past the timeout fails", []step{
			{store: hangCtx, advance: coolDown, wantCall: true, wantErr: floodgate.ErrStoreUnavailable, wantState: Open},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(succeed)
			l, clock := newLimiter(t, pingStore{f}, Config{Mode: FailClosed, Timeout: 100 * time.Millisecond})
			openBreaker(t, l, f)
			for i, s := range tc.steps {
				f.set(s.store)
				clock.Advance(s.advance)
				before := f.calls.Load()
				err := l.Probe(context.Background())
				if s.wantErr == nil && err != nil || s.wantErr != nil && !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d: Probe = %v, want %v", i, err, s.wantErr)
				}
				if called := f.calls.Load() > before; called != s.wantCall {
					t.Fatalf("step %d: store called = %v, want %v", i, called, s.wantCall)
				}
				if got := l.State(); got != s.wantState {
					t.Fatalf("step %d: state %v, want %v", i, got, s.wantState)
				}
			}
		})
	}
}

func TestProbeOnAClosedBreakerAsksNothing(t *testing.T) {
	f := newFake(failUnavailable)
	l, _ := newLimiter(t, pingStore{f}, Config{Mode: FailClosed})
	if err := l.Probe(context.Background()); err != nil || f.calls.Load() != 0 {
		t.Fatalf("Probe on a closed breaker = %v after %d calls, want nil and none", err, f.calls.Load())
	}
}

func TestProbeUsesConfigPing(t *testing.T) {
	f := newFake(succeed) // not a Pinger: a strategy over Redis
	var pinged int
	l, clock := newLimiter(t, f, Config{Mode: FailClosed, Ping: func(context.Context) error { pinged++; return nil }})
	openBreaker(t, l, f)
	clock.Advance(coolDown)
	if err := l.Probe(context.Background()); err != nil || pinged != 1 || l.State() != Closed {
		t.Fatalf("Probe = %v after %d pings, state %v; want nil, 1, closed", err, pinged, l.State())
	}
}

func TestProbeWithoutPing(t *testing.T) {
	f := newFake(succeed)
	l, clock := newLimiter(t, f, Config{Mode: FailClosed})
	openBreaker(t, l, f)
	clock.Advance(coolDown)
	if err := l.Probe(context.Background()); !errors.Is(err, ErrNoPing) {
		t.Fatalf("Probe = %v, want ErrNoPing", err)
	}
	if l.State() != Open {
		t.Fatalf("state %v, want open: Probe must not take the probe it cannot send", l.State())
	}
}
