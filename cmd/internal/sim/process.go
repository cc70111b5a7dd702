package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
)

// ErrOutsideProcess is wrapped by the error a delayed store call returns
// when it is made outside a simulated process (a bug in the simulator's
// wiring, never a network condition).
var ErrOutsideProcess = errors.New("sim: store call outside a simulated process")

// process is a decision or a round that may call the shared store: a
// goroutine that runs only between a hand-over from the engine and its next
// call or its end.
type process struct {
	toEngine chan *netCall // a call to make; nil when the process ended
	resume   chan error    // the call's outcome, when its reply is due
	// decidedAt is when the decision was taken, if not when the process
	// ends: the exact strategy decides at the store.
	decidedAt int64
	hasDecide bool
}

// netCall is one call to the shared store, run by the engine at the
// store's side.
type netCall struct {
	what    string
	exec    func()        // the real store operation, run at its arrival time
	timeout time.Duration // 0: the simulation's Timeout
}

type processKey struct{}

// processOf returns the process a context belongs to.
func processOf(ctx context.Context) (*process, bool) {
	p, ok := ctx.Value(processKey{}).(*process)
	return p, ok
}

// spawn runs fn as a process from now until it blocks on its first call
// or ends, and returns then; the engine resumes it later.
func (s *simulation) spawn(fn func(ctx context.Context, p *process)) {
	p := &process{toEngine: make(chan *netCall), resume: make(chan error)}
	ctx := context.WithValue(s.ctx, processKey{}, p)
	go func() {
		fn(ctx, p)
		p.toEngine <- nil
	}()
	s.await(p)
}

// await waits until p blocks on a call (and schedules it) or ends.
func (s *simulation) await(p *process) {
	if c := <-p.toEngine; c != nil {
		s.schedule(p, c)
	}
}

// schedule sends c over the simulated network: the store runs it after a
// one-way delay, and p resumes after another, or at the timeout when a leg
// is lost or too slow.
func (s *simulation) schedule(p *process, c *netCall) {
	s.storeCalls++
	limit := s.cfg.Timeout
	if c.timeout > 0 {
		limit = c.timeout
	}
	timeout := limit.Microseconds()
	there, back := s.oneWay(), s.oneWay()
	lostThere, lostBack := s.lost(), s.lost()
	failed := fmt.Errorf("sim: %s: no reply within %s: %w", c.what, limit, floodgate.ErrStoreUnavailable)
	if lostThere || there >= timeout {
		s.eng.after(timeout, func() { s.wake(p, failed) })
		return
	}
	s.eng.after(there, func() {
		c.exec()
		if lostBack || there+back > timeout {
			s.eng.after(timeout-there, func() { s.wake(p, failed) })
			return
		}
		s.eng.after(back, func() { s.wake(p, nil) })
	})
}

// wake hands p its call's outcome and waits for its next step.
func (s *simulation) wake(p *process, err error) {
	p.resume <- err
	s.await(p)
}

// call is what a delayed wrapper does: it hands exec to the engine, which
// runs it at the store's side, and returns when the reply arrives.
func call(ctx context.Context, what string, exec func()) error {
	return callWithin(ctx, what, 0, exec)
}

// callWithin is call with a timeout of its own (0: the simulation's).
func callWithin(ctx context.Context, what string, timeout time.Duration, exec func()) error {
	p, ok := processOf(ctx)
	if !ok {
		return fmt.Errorf("%w: %s", ErrOutsideProcess, what)
	}
	p.toEngine <- &netCall{what: what, exec: exec, timeout: timeout}
	return <-p.resume
}

// oneWay draws a one-way network delay, in µs.
func (s *simulation) oneWay() int64 {
	d := s.cfg.Delay.Microseconds() / 2
	if j := s.cfg.Jitter.Microseconds(); j > 0 {
		d += s.net.Int64N(j + 1)
	}
	return d
}

// lost draws whether one message is lost.
func (s *simulation) lost() bool {
	return s.cfg.Loss > 0 && s.net.Float64() < s.cfg.Loss
}
