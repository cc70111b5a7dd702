package failover

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/floodgate-io/floodgate"
)

// behaviour is what the fake store does with a call.
type behaviour int32

const (
	succeed         behaviour = iota
	failUnavailable           // an error wrapping floodgate.ErrStoreUnavailable
	failNet                   // a bare net.Error, as a client library returns it
	hangCtx                   // waits for its context
	hangIgnoringCtx           // waits for release, whatever its context says
	block                     // signals entered, then waits for unblock
	badLimit                  // answers with an error wrapping ErrInvalidLimit
	panics
	atDeadline // returns context.DeadlineExceeded at its context's deadline, on its own timer
)

// answered is what the fake store decides, so that tests can tell its
// answers from the policy's.
var answered = floodgate.Decision{Allowed: true, Limit: 99, Remaining: 42}

var errBadLimit = fmt.Errorf("%w: rate must be positive, got 0", floodgate.ErrInvalidLimit)

// fakeStore is a store whose health the test sets. It implements
// floodgate.BatchLimiter too.
type fakeStore struct {
	mode     atomic.Int32
	calls    atomic.Int64
	inFlight atomic.Int64
	maxIn    atomic.Int64
	release  chan struct{} // closed by the test: hangIgnoringCtx calls return
	entered  chan struct{} // block calls send here when they start
	unblock  chan struct{} // block calls return when this is closed
}

func newFake(b behaviour) *fakeStore {
	f := &fakeStore{release: make(chan struct{}), entered: make(chan struct{}, 64), unblock: make(chan struct{})}
	f.set(b)
	return f
}

func (f *fakeStore) set(b behaviour) { f.mode.Store(int32(b)) }

func (f *fakeStore) AllowN(ctx context.Context, _ string, _ floodgate.Limit, _ int64) (floodgate.Decision, error) {
	if err := f.answer(ctx); err != nil {
		return floodgate.Decision{}, err
	}
	return answered, nil
}

func (f *fakeStore) AllowAll(ctx context.Context, reqs []floodgate.Request) ([]floodgate.Decision, error) {
	if err := f.answer(ctx); err != nil {
		return nil, err
	}
	ds := make([]floodgate.Decision, len(reqs))
	for i := range ds {
		ds[i] = answered
	}
	return ds, nil
}

func (f *fakeStore) answer(ctx context.Context) error {
	f.calls.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for m := f.maxIn.Load(); n > m && !f.maxIn.CompareAndSwap(m, n); m = f.maxIn.Load() {
	}
	switch behaviour(f.mode.Load()) {
	case failUnavailable:
		return fmt.Errorf("redis: dial tcp 127.0.0.1:6379: %w", floodgate.ErrStoreUnavailable)
	case failNet:
		return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case hangCtx:
		<-ctx.Done()
		return ctx.Err()
	case hangIgnoringCtx:
		<-f.release
	case block:
		f.entered <- struct{}{}
		<-f.unblock
	case badLimit:
		return errBadLimit
	case panics:
		panic("store bug")
	case atDeadline:
		d, _ := ctx.Deadline()
		time.Sleep(time.Until(d))
		return context.DeadlineExceeded
	}
	return nil
}

// singleStore decides one request at a time: no AllowAll.
type singleStore struct{ f *fakeStore }

func (s singleStore) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	return s.f.AllowN(ctx, key, limit, cost)
}

// deadlineAware is a fake that says it honours deadlines, and does.
type deadlineAware struct {
	*fakeStore
	calledOn *atomic.Int64 // the goroutine of the last call, when not nil
}

func (deadlineAware) HonorsDeadline() bool { return true }

func (d deadlineAware) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	if d.calledOn != nil {
		d.calledOn.Store(goroutineID())
	}
	return d.fakeStore.AllowN(ctx, key, limit, cost)
}

// goroutineID reads the current goroutine's number from its stack trace's
// first line, "goroutine 42 [running]:": for tests only.
func goroutineID() int64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	fields := strings.Fields(string(buf))
	if len(fields) < 2 {
		return -1
	}
	id, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return -1
	}
	return id
}
