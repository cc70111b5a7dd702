package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/algo"
)

// Redis runs one script at a time, and a script call has a fixed cost
// (reading the command, finding and entering the script, turning each ARGV
// element into a Lua string) that is most of what deciding one request
// costs. So requests that arrive while calls are in flight are gathered and
// sent together, as one call of the algorithm's many-request script
// (many.lua), which decides each in arrival order exactly as the
// single-request script would: group commit. A lone caller is sent at
// once; under load the batches grow by themselves with the wait, so no
// request ever waits for a timer to be sent.
//
// A caller does not take its batch itself: it asks a sender for one, and
// the sender takes what has gathered by the time it runs. Under load the
// sender first yields: a server's handlers are woken together (a read of
// the connection brings several requests), and the runtime runs the
// goroutine a handler wakes before the handlers woken earlier, so without
// the yield each handler's request would leave alone, one call to Redis
// and one write each. Measured behind floodgate serve at 64 callers on 2
// cores: about 6 requests a call instead of 3.5 (10 instead of 4.5 with
// the service on one core), a third to a half fewer writes, and 15–25%
// less of Redis's CPU per decision. A lone caller's sender does not
// yield: nothing else is waiting to run, and the yield would cost it a
// trip through the runtime's global queue (6–24% of a lone caller's
// rate, measured).
//
// A batch is always sent by a goroutine of its own, never by a caller: each
// caller waits for its own request's answer in a select with its own
// deadline timer, so it returns by its deadline whatever its batch is
// doing (queued behind the batches in flight, dialing, on a full pipeline,
// waiting for a hung server, retrying a script Redis had forgotten). A
// request whose caller has left is not sent if it is still queued; if it
// is in flight its answer is dropped, and Redis may have counted it.

// DefaultMaxBatch is the default of Config.MaxBatch.
const DefaultMaxBatch = 128

// maxInFlight is how many batches of one group may be on the wire at once
// while batches are small: a request is then sent at once (alone, as the
// single-request script), so a few callers wait no longer than without
// batching. Once batches grow, inFlightLimit lowers it to 2 so that they
// grow further. Measured on 2 cores: a fixed 2 cost 8 callers a quarter of
// their throughput; a fixed 8 left 64 callers' batches small (more Redis
// work per decision); switching by the last batch's size keeps both.
const maxInFlight = 8

// pending is one caller's request, waiting in a batch; or, with call set,
// a call that is not a decision (see do).
type pending struct {
	key      string // with the prefix; a call's without
	c        *compiled
	cost     int64
	call     func(context.Context, *pending) error
	deadline time.Time       // when its caller stops waiting
	callers  bool            // the deadline is the caller's context's
	ctx      context.Context // the caller's, with Config.WrapClient only (see ioContext)

	// state says who owns the pending once it is queued: its caller while
	// waiting; after answered, its caller again (done has a value); after
	// abandoned, the batcher, which recycles it when it drops or answers it.
	state atomic.Int32
	done  chan struct{} // receives one value when d and err are set
	timer *time.Timer   // the caller's deadline, reused with the pending
	d     floodgate.Decision
	err   error

	alone [1]*pending // the batch when it is sent alone
}

// The states of a pending.
const (
	waiting int32 = iota
	answered
	abandoned
)

func newPending() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &pending{done: make(chan struct{}, 1), timer: t}
}

// batcher gathers the requests of one script (and, on a cluster, one hash
// slot: a script's keys must share one).
type batcher struct {
	l      *Limiter
	script *rueidis.Lua
	mu     sync.Mutex
	queue  []*pending
	flying int  // batches on the wire, and the sender asked for one (armed)
	last   int  // the size of the last batch taken
	armed  bool // a sender has been asked for the next batch and has not taken it yet
}

// slotBatchers are a cluster slot's batchers, one per algorithm.
type slotBatchers [algo.SlidingWindow + 1]*batcher

// batcherFor returns the batcher of a request's algorithm and key (with
// the prefix). On a cluster the slot's batchers are made on first use and
// found again without a lock or an allocation.
func (l *Limiter) batcherFor(c *compiled, key string) *batcher {
	kind := c.params.Kind
	if !l.cluster.Load() {
		return l.batchers[kind]
	}
	s := &l.slots[slot(key)]
	if bs := s.Load(); bs != nil {
		return bs[kind]
	}
	bs := new(slotBatchers)
	for k := range bs {
		bs[k] = &batcher{l: l, script: l.scripts.many[k]}
	}
	if !s.CompareAndSwap(nil, bs) {
		bs = s.Load() // another caller made them first
	}
	return bs[kind]
}

// decide queues a request and waits for its decision until its deadline
// (see wait).
func (b *batcher) decide(ctx context.Context, key string, c *compiled, cost int64) (floodgate.Decision, error) {
	if err := ctx.Err(); err != nil {
		return floodgate.Decision{}, fmt.Errorf("redisstore: key %q: %w", key[len(b.l.cfg.KeyPrefix):], err)
	}
	p := b.l.pendings.Get().(*pending)
	p.key, p.c, p.cost = key, c, cost
	p.deadline, p.callers = b.l.deadline(ctx)
	p.ctx = b.l.callerContext(ctx)
	b.mu.Lock()
	b.queue = append(b.queue, p)
	arm := !b.armed && b.flying < b.inFlightLimit()
	if arm {
		b.armed = true
		b.flying++ // the sender's batch, counted from now so that no other is asked for
	}
	yield := b.last > 1
	b.mu.Unlock()
	if arm {
		b.l.dispatch(job{b: b, yield: yield})
	}
	return b.l.wait(ctx, p)
}

// deadline is when a caller stops waiting for the store: Timeout from now,
// or ctx's deadline if that is sooner (callers reports which).
func (l *Limiter) deadline(ctx context.Context) (deadline time.Time, callers bool) {
	deadline = time.Now().Add(l.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && !d.After(deadline) {
		return d, true
	}
	return deadline, false
}

// wait waits for a queued request's answer, for its deadline or for ctx,
// whichever comes first, on the pending's own timer: the caller does not
// depend on the batch, the client library or Redis giving up. A caller
// that leaves abandons its request to the batcher. An answer that raced
// the deadline is still the answer.
func (l *Limiter) wait(ctx context.Context, p *pending) (floodgate.Decision, error) {
	p.timer.Reset(time.Until(p.deadline))
	select {
	case <-p.done:
		p.timer.Stop()
		return l.release(p)
	case <-p.timer.C:
	case <-ctx.Done():
		p.timer.Stop()
	}
	key, callers := l.keyOf(p), p.callers
	if !p.state.CompareAndSwap(waiting, abandoned) {
		<-p.done // answered as the wait ended: the value is on its way
		return l.release(p)
	}
	return floodgate.Decision{}, l.late(ctx, key, callers)
}

// keyOf is p's key as its caller named it.
func (l *Limiter) keyOf(p *pending) string {
	if p.call != nil {
		return p.key
	}
	return p.key[len(l.cfg.KeyPrefix):]
}

// gone reports whether p's caller has stopped waiting, or is about to:
// for a call, to take nothing more on its behalf.
func (p *pending) gone() bool {
	return p.state.Load() == abandoned || !time.Now().Before(p.deadline)
}

// late is the error of a caller that stopped waiting for key: its
// context's error when that ended the wait, otherwise outOfTime's.
func (l *Limiter) late(ctx context.Context, key string, callers bool) error {
	err := ctx.Err()
	if err == nil {
		err = l.outOfTime(callers)
	}
	return fmt.Errorf("redisstore: key %q: %w", key, err)
}

// outOfTime is why a call that reached its deadline failed: the caller's
// context.DeadlineExceeded when the deadline was its context's (callers),
// even if the context's own timer has not fired yet; otherwise the store's
// timeout, which wraps floodgate.ErrStoreUnavailable.
func (l *Limiter) outOfTime(callers bool) error {
	if callers {
		return context.DeadlineExceeded
	}
	return l.timedOut
}

// inFlightLimit is how many batches may be on the wire: maxInFlight while
// batches are small (few callers: send at once, as without batching), two
// once they grow (many callers: let requests gather, so that each call
// carries more of them and costs Redis less per decision); with MaxBatch 1,
// maxInFlightUnbatched. The caller holds mu.
func (b *batcher) inFlightLimit() int {
	switch {
	case b.l.cfg.MaxBatch == 1:
		return maxInFlightUnbatched
	case b.last >= gatherAbove:
		return 2
	}
	return maxInFlight
}

// maxInFlightUnbatched is how many calls of one request each may be on the
// wire at once with MaxBatch 1: as many as the callers of a busy service,
// and a bound on the goroutines a hung Redis holds.
const maxInFlightUnbatched = 256

// gatherAbove is the batch size from which requests are left to gather.
const gatherAbove = 4

// take removes the next batch from the queue and counts it in flight; the
// caller holds mu. Requests whose callers have left are dropped on the way:
// they are never sent. It returns nil when no request is left. A batch of
// one is its request's own one-element array, so that a lone caller's
// decision allocates no batch.
func (b *batcher) take() []*pending {
	n, i := 0, 0
	for ; i < len(b.queue) && n < b.l.cfg.MaxBatch; i++ {
		if p := b.queue[i]; p.state.Load() == abandoned {
			b.l.recycle(p)
		} else {
			b.queue[n] = p
			n++
		}
	}
	var batch []*pending
	switch n {
	case 0:
	case 1:
		p := b.queue[0]
		p.alone[0] = p
		batch = p.alone[:]
	default:
		batch = slices.Clone(b.queue[:n])
	}
	rest := copy(b.queue, b.queue[i:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	if batch != nil {
		b.flying++
		b.last = n
	}
	return batch
}

// job is what a sender is asked to do: take a batch of b and send it,
// after yielding if asked to; or, without b, run a call.
type job struct {
	b     *batcher
	yield bool
	call  *pending
}

// senderIdle is how long a sender waits for another batch before it ends.
const senderIdle = time.Second

// dispatch hands a job to an idle sender, or starts one: senders are
// reused, so that sending a batch costs no goroutine and no allocation
// once there are as many as batches in flight.
func (l *Limiter) dispatch(j job) {
	select {
	case l.work <- j:
	default:
		go l.sender(j)
	}
}

// sender sends j's batches, then the batches handed to it while idle,
// until it has been idle for senderIdle or the Limiter is closed.
func (l *Limiter) sender(j job) {
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	for {
		if j.b != nil {
			j.b.run(j.b.takeArmed(j.yield))
		} else {
			l.runCall(j.call)
		}
		idle.Reset(senderIdle)
		select {
		case j = <-l.work:
		case <-idle.C:
			return
		case <-l.closed:
			return
		}
	}
}

// do runs call, a call to Redis that is not a decision (AllowAll,
// Adjust), as a decision is sent: on a sender, on an ioContext, while its
// caller waits for it on its own timer until its deadline (see wait). call
// may ask p.gone before each step that commits more. A call abandoned at
// its deadline may still have taken effect.
func (l *Limiter) do(ctx context.Context, key string, call func(context.Context, *pending) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: key %q: %w", key, err)
	}
	p := l.pendings.Get().(*pending)
	p.key, p.call = key, call
	p.deadline, p.callers = l.deadline(ctx)
	p.ctx = l.callerContext(ctx)
	l.dispatch(job{call: p})
	_, err := l.wait(ctx, p)
	return err
}

// runCall runs a call (see do) and answers its caller.
func (l *Limiter) runCall(p *pending) {
	ctx, cancel := l.ioContextFor(p.ctx)
	p.err = p.call(ctx, p)
	cancel()
	l.answer(p)
}

// takeArmed takes the batch a sender was asked for (see decide), once the
// goroutines already runnable have run if yield is set: their requests
// join it. It returns nil when another sender, done with its own batch,
// has taken them all.
func (b *batcher) takeArmed(yield bool) []*pending {
	if b.l.beforeTake != nil {
		b.l.beforeTake(yield)
	}
	if yield {
		runtime.Gosched()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	b.flying-- // take counts the batch it takes
	return b.take()
}

// run sends batches until the queue is empty.
func (b *batcher) run(batch []*pending) {
	for batch != nil {
		b.send(batch)
		batch = b.done()
	}
}

// done counts a batch out of flight and takes the next, if any is waiting.
func (b *batcher) done() []*pending {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flying--
	if len(b.queue) > 0 {
		return b.take()
	}
	return nil
}

// send decides one batch and hands each caller its decision. A batch of
// one goes as the single-request script, which is the cheaper call. The
// call waits for Redis as long as the connection does (see ioContext), not
// only as long as its callers.
func (b *batcher) send(batch []*pending) {
	l := b.l
	ctx, cancel := l.ioContextFor(batch[0].ctx)
	defer cancel()
	if len(batch) == 1 {
		p := batch[0]
		p.d, _, p.err = l.call(ctx, l.scripts.single[p.c.params.Kind], p.key[len(l.cfg.KeyPrefix):], singleArgs(l.now(), p.c, p.cost, l.slack))
		l.answer(p)
		return
	}
	keys, args := batchCall(l.now(), l.slack, batch)
	reply, err := b.script.Exec(ctx, l.client, keys, args).AsIntSlice()
	width := manyReplyWidth(batch[0].c.params.Kind)
	if err == nil && len(reply) != width*len(batch)+1 {
		err = fmt.Errorf("redisstore: script replied %d values for %d requests, want %d", len(reply), len(batch), width*len(batch)+1)
	}
	for i, p := range batch {
		if err != nil {
			p.err = l.storeError(ctx, p.key[len(l.cfg.KeyPrefix):], err)
		} else {
			p.d, _, p.err = decision(manyDecision(reply, i, width, p.c.params.Limit()))
		}
		l.answer(p)
	}
}

// ioContext is the context of a call to Redis: it ends when the
// connection would give up on an answer (Timeout + DialTimeout, rueidis's
// ConnWriteTimeout), not at its callers' deadlines, which their own
// timers enforce. rueidis closes a connection when a command sent alone
// misses its context's deadline, so a deadline as short as the callers'
// would turn every answer late by a millisecond into a reconnection, and,
// on a busy machine, reconnections that miss it too into an outage; a
// dial started for a call would be cut short the same way.
func (l *Limiter) ioContext() (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(context.Background(), l.cfg.Timeout+l.cfg.DialTimeout, l.timedOut)
}

// ioContextFor is ioContext for a call whose first caller's context is
// caller (see callerContext; nil for none): the call keeps its values,
// not its cancellation, so that an instrumented client
// (Config.WrapClient) puts the command's span inside the caller's.
func (l *Limiter) ioContextFor(caller context.Context) (context.Context, context.CancelFunc) {
	if caller == nil {
		return l.ioContext()
	}
	return context.WithTimeoutCause(context.WithoutCancel(caller), l.cfg.Timeout+l.cfg.DialTimeout, l.timedOut)
}

// callerContext is the context a pending keeps for its call: the caller's
// when the client is instrumented (Config.WrapClient), else nil, so that
// an uninstrumented store neither keeps its callers' contexts alive nor
// pays for carrying their values.
func (l *Limiter) callerContext(ctx context.Context) context.Context {
	if l.cfg.WrapClient == nil {
		return nil
	}
	return ctx
}

// answer hands a request's outcome to its caller, or recycles the request
// if its caller has left. Either way the batch is done with p. A failure
// once the caller's deadline has passed is that deadline's, whatever the
// client library made of it: the caller gets the error its own timer would
// have given it.
func (l *Limiter) answer(p *pending) {
	if p.err != nil && !time.Now().Before(p.deadline) {
		p.err = l.late(context.Background(), l.keyOf(p), p.callers)
	}
	if p.state.CompareAndSwap(waiting, answered) {
		p.done <- struct{}{}
		return
	}
	l.recycle(p)
}

// batchCall is the KEYS and ARGV of many.lua for a batch: the limits are
// sent once each, and each request names its own only when there are
// several; the cost once when all requests have the same (every ARGV
// element costs Redis a string and the script a conversion).
func batchCall(now, slack string, batch []*pending) (keys, args []string) {
	keys = make([]string, len(batch))
	var limits []*compiled
	which := make([]int, len(batch))
	for i, p := range batch {
		keys[i] = p.key
		at := -1
		for j, c := range limits {
			if c == p.c {
				at = j
				break
			}
		}
		if at < 0 {
			at = len(limits)
			limits = append(limits, p.c)
		}
		which[i] = at + 1
	}
	width := len(batch[0].c.single)
	args = make([]string, 0, 3+len(limits)*width+2*len(batch))
	args = append(args, now, slack, strconv.Itoa(len(limits)))
	for _, c := range limits {
		args = append(args, c.single...)
	}
	if sameCost(batch) {
		args = append(args, strconv.FormatInt(batch[0].cost, 10))
	} else {
		for _, p := range batch {
			args = append(args, strconv.FormatInt(p.cost, 10))
		}
	}
	if len(limits) > 1 {
		for _, w := range which {
			args = append(args, strconv.Itoa(w))
		}
	}
	return keys, args
}

// sameCost reports whether a batch of more than one request costs the same
// throughout (a batch of one sends its cost as a list of one: the same).
func sameCost(batch []*pending) bool {
	for _, p := range batch[1:] {
		if p.cost != batch[0].cost {
			return false
		}
	}
	return len(batch) > 1
}

// manyReplyWidth is how many values many.lua replies per request of an
// algorithm: the buckets send their delay, the windows have none.
func manyReplyWidth(k algo.Kind) int {
	if k.IsBucket() {
		return 4
	}
	return 3
}

// manyDecision puts request i's values of a many.lua reply in the order of
// the single-request scripts' reply, with what the script leaves out.
func manyDecision(reply []int64, i, width int, limit int64) []int64 {
	v := reply[width*i : width*i+width]
	var delay int64
	if width == 4 {
		delay = v[3]
	}
	return []int64{v[0] & 1, limit, v[0] >> 1, v[1], v[2], delay, reply[len(reply)-1]}
}

// release returns an answered request's outcome, and the pending to the
// pool.
func (l *Limiter) release(p *pending) (floodgate.Decision, error) {
	d, err := p.d, p.err
	l.recycle(p)
	return d, err
}

// recycle puts a pending back in the pool, its done channel empty and its
// timer stopped, by whoever owns it last (see pending.state).
func (l *Limiter) recycle(p *pending) {
	p.key, p.c, p.cost, p.call, p.callers, p.d, p.err, p.alone[0] = "", nil, 0, nil, false, floodgate.Decision{}, nil, nil
	p.ctx = nil
	p.state.Store(waiting)
	l.pendings.Put(p)
}
