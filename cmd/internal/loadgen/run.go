package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// client makes the calls of one worker; only that worker's goroutine uses
// it, so it may keep reusable state without locking.
type client interface {
	// call asks about the descriptor value key and reports whether the
	// service allowed it; err is any outcome other than allowed or denied.
	call(ctx context.Context, key int) (allowed bool, err error)
}

// transport owns what the workers share: connections, pools.
type transport interface {
	client(worker int) client
	close()
}

// Run generates load as cfg describes and reports what happened. It
// returns an error only when cfg is invalid (a *ConfigError naming the
// field) or the client cannot be set up; a service that fails or cannot be
// reached shows as Report.Errors, with the first message in
// Report.FirstError.
//
// Cancelling ctx ends the run early and still returns its report, with
// Stopped set to StopCanceled and a nil error, so that an interrupted
// benchmark still prints what it measured. Calls cut short by the
// cancellation are not counted.
func Run(ctx context.Context, cfg Config) (Report, error) {
	p, err := cfg.resolve()
	if err != nil {
		return Report{}, err
	}
	var t transport
	switch p.Target {
	case TargetGRPC:
		t, err = newGRPC(ctx, p)
	case TargetHTTP:
		t, err = newHTTP(p)
	case TargetGubernator:
		t, err = newGubernator(ctx, p)
	}
	if err != nil {
		return Report{}, err
	}
	defer t.close()

	s := &schedule{requests: p.Requests, rate: p.Rate}
	s.start = time.Now()
	s.deadline = s.start.Add(p.Duration)
	if p.Rate > 0 {
		s.interval = float64(time.Second) / p.Rate
	}
	runCtx, cancel := context.WithDeadline(ctx, s.deadline)
	defer cancel()
	// Workers poll an atomic rather than runCtx.Err(), which takes the
	// context's mutex: one shared lock per call is what this package avoids.
	stopWatch := context.AfterFunc(runCtx, func() { s.stopped.Store(true) })
	defer stopWatch()

	workers := make([]*worker, p.Concurrency)
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{
			client:  t.client(i),
			keys:    p.Keys,
			rng:     rand.New(rand.NewPCG(rand.Uint64(), uint64(i))),
			counted: p.Requests > 0 || p.Rate > 0,
		}
		if p.CallLog != nil {
			w.log.room = max(1, MaxCallLog/p.Concurrency)
		}
		workers[i] = w
		wg.Go(func() { w.run(ctx, runCtx, s) })
	}
	wg.Wait()
	elapsed := time.Since(s.start)

	rep := Report{
		Target:      p.Target,
		Addr:        p.Addr,
		Concurrency: p.Concurrency,
		Rate:        p.Rate,
		Elapsed:     elapsed,
	}
	var h histogram
	var firstAt time.Time
	for _, w := range workers {
		rep.Allowed += w.allowed
		rep.Denied += w.denied
		rep.Errors += w.errors
		h.merge(&w.hist)
		if w.firstErr != nil && (firstAt.IsZero() || w.firstErrAt.Before(firstAt)) {
			firstAt, rep.FirstError = w.firstErrAt, w.firstErr.Error()
		}
	}
	rep.Calls = rep.Allowed + rep.Denied + rep.Errors
	if p.CallLog != nil {
		logs := make([]*callLog, len(workers))
		for i, w := range workers {
			logs[i] = &w.log
		}
		if err := writeCallLog(p.CallLog, logs); err != nil {
			return rep, fmt.Errorf("loadgen: writing the call log: %w", err)
		}
	}
	rep.Min, rep.Max = time.Duration(h.min), time.Duration(h.max)
	rep.Mean = h.mean()
	rep.P50, rep.P90, rep.P99 = h.quantile(0.50), h.quantile(0.90), h.quantile(0.99)
	switch {
	case cutShort(ctx):
		rep.Stopped = StopCanceled
	case p.Requests > 0 && rep.Calls >= p.Requests:
		rep.Stopped = StopRequests
	default:
		rep.Stopped = StopDuration
	}
	return rep, nil
}

// schedule is the state the workers share. It is read-mostly: next is
// touched only when a run has a request cap or a rate.
type schedule struct {
	start, deadline time.Time
	requests        int64
	rate            float64
	interval        float64 // ns between scheduled calls, open loop only
	next            atomic.Int64
	stopped         atomic.Bool
}

// worker keeps its own counters and histogram so that recording a call
// touches no shared memory; Run sums them after the workers have stopped.
type worker struct {
	client  client
	keys    int
	rng     *rand.Rand
	counted bool // the run needs a ticket per call (request cap or rate)

	allowed, denied, errors int64
	hist                    histogram
	log                     callLog
	firstErr                error
	firstErrAt              time.Time
}

func (w *worker) run(ctx, runCtx context.Context, s *schedule) {
	// Per-call timeouts register with their parent context under its lock;
	// a context of the worker's own keeps that lock uncontended.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()

	for !s.stopped.Load() {
		t0 := time.Time{} // when the call's latency starts; zero: when it is sent
		if w.counted {
			i := s.next.Add(1) - 1
			if s.requests > 0 && i >= s.requests {
				return
			}
			if s.rate > 0 {
				// Absolute times, not sleeps between calls, so that
				// lateness does not accumulate into a lower rate.
				at := s.start.Add(time.Duration(float64(i) * s.interval))
				if !at.Before(s.deadline) {
					return
				}
				// A call already overdue when claimed waited for a free
				// worker, that is for the service: its latency counts from
				// when it was due. A call the worker slept for counts from
				// when it is sent, so that timer lateness, which is the
				// client's, is not charged to the service.
				if d := time.Until(at); d <= 0 {
					t0 = at
				} else {
					if timer == nil {
						timer = time.NewTimer(d)
					} else {
						timer.Reset(d)
					}
					select {
					case <-timer.C:
					case <-runCtx.Done():
						return
					}
				}
			}
		}
		if t0.IsZero() {
			t0 = time.Now()
		}
		allowed, err := w.client.call(wctx, w.rng.IntN(w.keys))
		lat := time.Since(t0)
		if err != nil {
			if cutShort(ctx) {
				return // cut short by the caller, not failed by the service
			}
			w.errors++
			w.log.record(t0, lat, outcomeError)
			if w.firstErr == nil {
				w.firstErr, w.firstErrAt = err, time.Now()
			}
			continue
		}
		w.hist.record(lat)
		if allowed {
			w.allowed++
			w.log.record(t0, lat, outcomeAllowed)
		} else {
			w.denied++
			w.log.record(t0, lat, outcomeDenied)
		}
	}
}

// cutShort reports whether ctx has ended or is past its deadline. The
// deadline is checked too because a call can fail with DeadlineExceeded a
// moment before the context's own timer fires: gRPC checks the deadline
// before sending, and the server enforces it by its own clock.
func cutShort(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
