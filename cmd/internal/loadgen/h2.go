package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The gRPC targets speak HTTP/2 themselves, through h2Conn, rather than
// through grpc-go's client. A load generator shares the machine with the
// service it measures, and grpc-go's client took as much CPU per call as
// the service under test (about 20 µs: its streams, contexts, retry
// buffers and picker are there for applications, not for a closed loop of
// identical unary calls), so that it decided how fast either service
// could look. h2Conn does what a unary call needs and no more: one
// HEADERS and one DATA frame out, the answer's frames in, flow control,
// SETTINGS, PING and GOAWAY. Its writes are batched: callers write their
// frames into a buffer and a goroutine of the connection's flushes it, so
// that the calls made while one flush is under way go out in the next, in
// one system call.

// h2Window is the flow-control window h2Conn grants the server, for the
// connection and for each stream; the connection's is topped up whenever
// half of it has been used.
const h2Window = 1 << 30

// errH2Closed is the error of a call on a connection that has ended.
var errH2Closed = errors.New("loadgen: HTTP/2 connection closed")

// h2Conn is one HTTP/2 connection carrying unary gRPC calls.
type h2Conn struct {
	conn      net.Conn
	authority string

	// wmu serializes writes: frames, and the header encoder, whose state
	// is the connection's.
	wmu    sync.Mutex
	bw     *bufio.Writer
	wfr    *http2.Framer
	henc   *hpack.Encoder
	hbuf   bytes.Buffer
	hkept  keptHeaders   // a header block sent again as is (under wmu)
	hblock []byte        // the block being sent (under wmu)
	dirty  bool          // the buffer holds frames to flush (under wmu)
	flush  chan struct{} // wakes the flusher; buffered, 1

	mu        sync.Mutex
	cond      *sync.Cond // waits for send window, a stream slot, or the end
	nextID    uint32
	calls     map[uint32]*h2Call
	active    uint32 // calls that hold a stream slot: registered, or about to be
	sendWin   int64  // the connection's send window
	maxActive uint32 // the server's SETTINGS_MAX_CONCURRENT_STREAMS
	err       error  // why the connection ended; nil while it serves

	unacked int64 // bytes received since the last WINDOW_UPDATE (reader only)
	hdec    *hpack.Decoder
	hdr     answerHeaders // the header block being read (reader only)
	ended   atomic.Bool
	done    chan struct{}
}

// h2Call is one call's answer as the reader gathers it. A caller reuses
// its h2Call for its next call (see h2Caller) unless the reader may still
// hold it: after a cancel, or a connection's failure.
type h2Call struct {
	out      []byte // the request as sent (DATA), kept for its memory
	body     []byte // the DATA received
	status   int    // HTTP :status
	hasGRPC  bool   // a grpc-status was received
	grpcCode codes.Code
	grpcMsg  string
	err      error
	done     chan struct{} // receives one value when the call has ended
	timer    *time.Timer   // the call's deadline
}

func newH2Call() *h2Call {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &h2Call{done: make(chan struct{}, 1), timer: t}
}

// h2Caller makes one caller's calls, one after the other, in the same
// h2Call: a call then allocates nothing of its own, so that the load
// generator collects rarely (its collections stop all its callers at
// once, which it would report as the service's latency).
type h2Caller struct{ call *h2Call }

// invoke makes one unary call of method on s's connection within
// timeout (0: ctx's deadline only). ctx ends the call early too.
func (k *h2Caller) invoke(ctx context.Context, s *h2Slot, timeout time.Duration, method string, req wireRequest, resp wireResponse) error {
	c, err := s.conn(ctx)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	deadline, _ := ctx.Deadline()
	if timeout > 0 {
		if d := time.Now().Add(timeout); deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
	}
	if k.call == nil {
		k.call = newH2Call()
	}
	reusable, err := c.invoke(ctx, deadline, k.call, method, req, resp)
	if !reusable {
		k.call = nil
	}
	return err
}

// dialH2 connects to addr and exchanges the connection prefaces.
func dialH2(ctx context.Context, addr string) (*h2Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &h2Conn{conn: nc, authority: addr, bw: bufio.NewWriterSize(nc, 32<<10), nextID: 1,
		calls: map[uint32]*h2Call{}, sendWin: 65535, maxActive: 1<<31 - 1, done: make(chan struct{}),
		flush: make(chan struct{}, 1)}
	c.cond = sync.NewCond(&c.mu)
	c.wfr = http2.NewFramer(c.bw, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	rfr := http2.NewFramer(nil, bufio.NewReaderSize(nc, 32<<10))
	rfr.SetReuseFrames() // frame is done with a frame before the next is read
	c.hdec = hpack.NewDecoder(h2HeaderTable, c.header)
	c.hdec.SetMaxStringLength(h2MaxHeaderList)
	_, err = c.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = c.wfr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2Window},
			http2.Setting{ID: http2.SettingEnablePush, Val: 0})
	}
	if err == nil {
		err = c.wfr.WriteWindowUpdate(0, h2Window-65535)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	go c.read(rfr)
	go c.flusher()
	return c, nil
}

// flusher flushes what callers wrote, until the connection ends.
func (c *h2Conn) flusher() {
	for {
		select {
		case <-c.flush:
		case <-c.done:
			return
		}
		runtime.Gosched() // let the callers that are about to write join this flush
		c.wmu.Lock()
		var err error
		if c.dirty {
			c.dirty = false
			err = c.bw.Flush()
		}
		c.wmu.Unlock()
		if err != nil {
			c.fail(fmt.Errorf("loadgen: writing to %s: %w", c.authority, err))
		}
	}
}

// close ends the connection; calls in flight fail.
func (c *h2Conn) close() {
	c.conn.Close()
	<-c.done
}

// invoke makes one unary call of method in call: req out, resp in, by
// deadline (zero: none) unless ctx ends first. Its error is a gRPC status
// error when the server answered with one. reusable reports whether call
// may serve the next call: not when the reader may still hold it.
func (c *h2Conn) invoke(ctx context.Context, deadline time.Time, call *h2Call, method string, req wireRequest, resp wireResponse) (reusable bool, err error) {
	call.body, call.status, call.hasGRPC, call.grpcCode, call.grpcMsg, call.err = call.body[:0], 0, false, 0, "", nil
	msg := req.appendMessage(append(call.out[:0], 0, 0, 0, 0, 0)) // not compressed, and the length below
	binary.BigEndian.PutUint32(msg[1:5], uint32(len(msg)-5))
	call.out = msg
	if err := c.reserve(len(msg)); err != nil {
		return true, err
	}
	id, err := c.send(deadline, call, method, msg)
	if err != nil {
		if id == 0 { // never registered: give its slot back
			c.release()
			return true, err
		}
		<-call.done // failed with the connection
		return false, err
	}
	var expired <-chan time.Time
	if !deadline.IsZero() {
		call.timer.Reset(time.Until(deadline))
		defer call.timer.Stop()
		expired = call.timer.C
	}
	select {
	case <-call.done:
	case <-expired:
		c.cancel(id)
		<-call.done
		return false, status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case <-ctx.Done():
		c.cancel(id)
		<-call.done
		return false, status.FromContextError(ctx.Err()).Err()
	}
	if call.err != nil {
		if err := deadlineReset(deadline, call.err); err != nil {
			return false, err
		}
		return false, call.err
	}
	return true, call.answer(resp)
}

// deadlineReset is DeadlineExceeded for a call whose stream the server
// reset with CANCEL once ctx's deadline had passed, else nil. A server
// gives up at the grpc-timeout the call sent, which it counts from later
// than this side does, and resets the stream; on a busy machine that may
// arrive before this side's own timer fires. It is the deadline, as
// grpc-go's client reports it.
func deadlineReset(deadline time.Time, err error) error {
	r, ok := err.(*streamReset)
	if !ok || r.code != http2.ErrCodeCancel || deadline.IsZero() || time.Now().Before(deadline) {
		return nil
	}
	return status.Error(codes.DeadlineExceeded, "deadline exceeded: the server cancelled the call at its grpc-timeout")
}

// streamReset is the error of a call whose stream the server reset.
type streamReset struct{ code http2.ErrCode }

func (e *streamReset) Error() string { return "stream reset by the server: " + e.code.String() }

// GRPCStatus is the status of a reset stream: Unavailable.
func (e *streamReset) GRPCStatus() *status.Status { return status.New(codes.Unavailable, e.Error()) }

// reserve waits for a stream slot and send window for n bytes, and takes
// both.
func (c *h2Conn) reserve(n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.err == nil && (c.sendWin < int64(n) || c.active >= c.maxActive) {
		c.cond.Wait()
	}
	if c.err != nil {
		return c.err
	}
	c.sendWin -= int64(n)
	c.active++
	return nil
}

// release gives back a slot that reserve took for a call never sent.
func (c *h2Conn) release() {
	c.mu.Lock()
	c.active--
	c.cond.Broadcast()
	c.mu.Unlock()
}

// send registers call under a new stream ID and writes its HEADERS and
// its one DATA frame. IDs are taken while writing, so that they reach the
// server in increasing order, as HTTP/2 requires. It returns the ID, 0
// when the call was not registered (the connection had ended).
func (c *h2Conn) send(deadline time.Time, call *h2Call, method string, msg []byte) (uint32, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	id := c.nextID
	c.nextID += 2
	c.calls[id] = call
	c.mu.Unlock()
	block := append(c.hblock[:0], c.requestHeaders(method)...)
	if !deadline.IsZero() {
		block = appendTimeoutField(block, time.Until(deadline))
	}
	c.hblock = block
	err := c.wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
	if err == nil {
		err = c.wfr.WriteData(id, true, msg)
	}
	if err == nil && !c.dirty {
		c.dirty = true
		select {
		case c.flush <- struct{}{}:
		default:
		}
	}
	if err != nil {
		err = fmt.Errorf("loadgen: writing to %s: %w", c.authority, err)
		c.fail(err) // fails this call too
	}
	return id, err
}

// keptHeaders is the header block of a method's calls, without the
// deadline, once it is made only of references to the server's table.
type keptHeaders struct {
	method string
	block  []byte // nil: none kept
}

// requestHeaders is the header block of a call of method, without its
// deadline (which send appends). The first call of a method on a
// connection adds its fields to the server's HPACK table; from the next
// call on, the encoder writes only references to them, and a block of
// references leaves the table as it was: that block is kept and sent as
// is from then on, with no encoding (the encoder's table searches were a
// tenth of the load generator's CPU). Only the encoder changes the table,
// so the kept block holds until it is called again: for another method, or
// after the server has resized its table (settings).
func (c *h2Conn) requestHeaders(method string) []byte {
	if c.hkept.block != nil && c.hkept.method == method {
		return c.hkept.block
	}
	c.hbuf.Reset()
	refs := true
	for _, f := range [...]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method}, {Name: ":authority", Value: c.authority},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
		{Name: "user-agent", Value: userAgent},
	} {
		n := c.hbuf.Len()
		c.henc.WriteField(f)
		refs = refs && c.hbuf.Bytes()[n]&0x80 != 0 // an indexed field (RFC 7541, 6.1)
	}
	c.hkept = keptHeaders{}
	if refs {
		c.hkept = keptHeaders{method: method, block: bytes.Clone(c.hbuf.Bytes())}
	}
	return c.hbuf.Bytes()
}

// appendTimeoutField appends the grpc-timeout field of d as a literal
// that the server does not add to its table (RFC 7541, 6.2.2: a new
// name, then the value, neither Huffman-coded). Each call's timeout
// differs: added to the table, it would push the other fields out of it,
// and the next call's block would be another.
func appendTimeoutField(dst []byte, d time.Duration) []byte {
	const name = "grpc-timeout"
	dst = append(dst, 0, byte(len(name)))
	dst = append(dst, name...)
	n := len(dst)
	dst = appendGRPCTimeout(append(dst, 0), d) // at most 9 bytes: the length fits the byte
	dst[n] = byte(len(dst) - n - 1)
	return dst
}

// appendGRPCTimeout appends d as gRPC's grpc-timeout header: at most 8
// digits and a unit, rounded up.
func appendGRPCTimeout(dst []byte, d time.Duration) []byte {
	if d <= 0 {
		return append(dst, "1n"...)
	}
	for _, u := range [...]struct {
		unit byte
		d    time.Duration
	}{{'n', time.Nanosecond}, {'u', time.Microsecond}, {'m', time.Millisecond}, {'S', time.Second}, {'M', time.Minute}} {
		if n := (d + u.d - 1) / u.d; n < 1e8 {
			return append(strconv.AppendInt(dst, int64(n), 10), u.unit)
		}
	}
	return append(strconv.AppendInt(dst, int64(d/time.Hour)+1, 10), 'H')
}

// cancel resets a stream whose caller left.
func (c *h2Conn) cancel(id uint32) {
	c.wmu.Lock()
	err := c.wfr.WriteRSTStream(id, http2.ErrCodeCancel)
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
	}
	c.finish(id, context.Canceled)
}

// finish ends a call with err (if it is still open).
func (c *h2Conn) finish(id uint32, err error) {
	c.mu.Lock()
	call := c.calls[id]
	if call != nil {
		delete(c.calls, id)
		c.active--
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	if call != nil {
		call.err = err
		call.done <- struct{}{}
	}
}

// fail ends the connection with err: every open call fails with it, and
// so do later ones.
func (c *h2Conn) fail(err error) {
	c.ended.Store(true)
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	calls := c.calls
	c.calls = map[uint32]*h2Call{}
	c.active -= uint32(len(calls))
	c.cond.Broadcast()
	c.mu.Unlock()
	for _, call := range calls {
		call.err = err
		call.done <- struct{}{}
	}
	c.conn.Close()
}

// read serves the connection's incoming frames until it ends.
func (c *h2Conn) read(fr *http2.Framer) {
	defer close(c.done)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			c.fail(fmt.Errorf("%w: %w", errH2Closed, err))
			return
		}
		if err := c.frame(f); err != nil {
			c.fail(err)
			return
		}
	}
}

func (c *h2Conn) frame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		return c.settings(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			return c.write(func() error { return c.wfr.WritePing(true, f.Data) })
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.mu.Lock()
			c.sendWin += int64(f.Increment)
			c.cond.Broadcast()
			c.mu.Unlock()
		}
	case *http2.HeadersFrame:
		c.hdr = answerHeaders{stream: f.StreamID, ended: f.StreamEnded()}
		return c.headerFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.ContinuationFrame: // the framer checks that it continues c.hdr's block
		return c.headerFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.DataFrame:
		return c.data(f)
	case *http2.RSTStreamFrame:
		c.finish(f.StreamID, &streamReset{code: f.ErrCode})
	case *http2.GoAwayFrame:
		return fmt.Errorf("%w: GOAWAY %v %q", errH2Closed, f.ErrCode, f.DebugData())
	}
	return nil
}

func (c *h2Conn) settings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	c.mu.Lock()
	if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok {
		c.maxActive = v
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	// SETTINGS_INITIAL_WINDOW_SIZE bounds each stream's sending: a call
	// sends one small message, far below the smallest window HTTP/2 allows
	// a server to set that still lets gRPC work, so it is not tracked.
	return c.write(func() error {
		if v, ok := f.Value(http2.SettingHeaderTableSize); ok {
			// The encoder's table follows the server's, back up to
			// HPACK's initial size too; the next block starts by saying so.
			c.henc.SetMaxDynamicTableSizeLimit(v)
			c.henc.SetMaxDynamicTableSize(min(v, h2HeaderTable))
			c.hkept = keptHeaders{}
		}
		return c.wfr.WriteSettingsAck()
	})
}

// write writes one control frame and flushes.
func (c *h2Conn) write(frame func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := frame(); err != nil {
		return err
	}
	return c.bw.Flush()
}

// call is the open call of a stream, or nil.
func (c *h2Conn) call(id uint32) *h2Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

// answerHeaders is what the reader keeps of the header block it is
// decoding: the fields a call's answer needs.
type answerHeaders struct {
	stream    uint32
	ended     bool // the block ends its stream
	status    int  // :status, if hasStatus
	hasStatus bool
	code      string // grpc-status, if hasCode
	hasCode   bool
	msg       string // grpc-message
	size      uint32 // the block's size as HTTP/2 counts it (RFC 9113, 6.5.2)
}

// h2HeaderTable is the size of HPACK's table that h2Conn's encoder uses
// at most, and its decoder allows the server: HPACK's initial size.
const h2HeaderTable = 4096

// h2MaxHeaderList is the largest header block the reader accepts.
const h2MaxHeaderList = 1 << 20

// headerFragment decodes the next piece of the header block in c.hdr, and
// when it is the last, gives the block to its call. Decoding happens here
// rather than in the framer (ReadMetaHeaders), which builds a frame and a
// list of every field for each block: the reader needs three fields.
func (c *h2Conn) headerFragment(p []byte, last bool) error {
	if _, err := c.hdec.Write(p); err != nil {
		return fmt.Errorf("loadgen: decoding the headers of stream %d: %w", c.hdr.stream, err)
	}
	if c.hdr.size > h2MaxHeaderList {
		return fmt.Errorf("loadgen: the headers of stream %d exceed %d bytes", c.hdr.stream, h2MaxHeaderList)
	}
	if !last {
		return nil
	}
	if err := c.hdec.Close(); err != nil {
		return fmt.Errorf("loadgen: decoding the headers of stream %d: %w", c.hdr.stream, err)
	}
	c.headers(&c.hdr)
	return nil
}

// header is the decoder's: it takes one field of the block in c.hdr.
func (c *h2Conn) header(f hpack.HeaderField) {
	h := &c.hdr
	h.size += f.Size()
	switch f.Name {
	case ":status":
		h.status, _ = strconv.Atoi(f.Value)
		h.hasStatus = true
	case "grpc-status":
		h.code, h.hasCode = f.Value, true
	case "grpc-message":
		h.msg = f.Value
	}
}

// headers gives a call what a header block (its answer's headers, or
// trailers) says.
func (c *h2Conn) headers(h *answerHeaders) {
	call := c.call(h.stream)
	if call == nil {
		return
	}
	if h.hasStatus {
		call.status = h.status
	}
	if h.hasCode {
		n, err := strconv.Atoi(h.code)
		if err != nil {
			n = int(codes.Unknown)
		}
		call.hasGRPC, call.grpcCode, call.grpcMsg = true, codes.Code(n), h.msg
	}
	if h.ended {
		c.finish(h.stream, nil)
	}
}

func (c *h2Conn) data(f *http2.DataFrame) error {
	if n := int64(f.Length); n > 0 {
		c.unacked += n
		if c.unacked >= h2Window/2 {
			n, c.unacked = c.unacked, 0
			if err := c.write(func() error { return c.wfr.WriteWindowUpdate(0, uint32(n)) }); err != nil {
				return err
			}
		}
	}
	if call := c.call(f.StreamID); call != nil {
		call.body = append(call.body, f.Data()...) // the framer reuses its buffer
		if f.StreamEnded() {
			c.finish(f.StreamID, nil)
		}
	}
	return nil
}

// answer is the call's outcome: its transport error, its gRPC status, or
// its one message read into resp.
func (call *h2Call) answer(resp wireResponse) error {
	switch {
	case call.err != nil:
		return call.err
	case call.status != 200:
		return status.Errorf(codes.Unknown, "HTTP status %d", call.status)
	case !call.hasGRPC:
		return status.Error(codes.Internal, "the server sent no grpc-status")
	case call.grpcCode != codes.OK:
		msg := call.grpcMsg
		if m, err := url.PathUnescape(msg); err == nil { // gRPC percent-encodes it
			msg = m
		}
		return status.Error(call.grpcCode, msg)
	}
	b := call.body
	if len(b) < 5 || b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5 {
		return status.Errorf(codes.Internal, "the answer is not one uncompressed gRPC message (%d bytes)", len(b))
	}
	return resp.readMessage(b[5:])
}

// h2Slot is a connection that is dialled again when it has ended (the
// service restarted, say), at most every h2Redial: a run goes on, counting
// the calls that failed meanwhile as errors, as grpc-go's client would
// reconnect.
type h2Slot struct {
	addr    string
	timeout time.Duration // a dial's bound
	c       atomic.Pointer[h2Conn]

	mu       sync.Mutex
	lastErr  error
	redialAt time.Time
}

// h2Redial is how often an ended connection is dialled again.
const h2Redial = 100 * time.Millisecond

// conn is the slot's live connection, dialled if need be.
func (s *h2Slot) conn(ctx context.Context) (*h2Conn, error) {
	if c := s.c.Load(); c != nil && !c.ended.Load() {
		return c, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.c.Load(); c != nil && !c.ended.Load() {
		return c, nil
	}
	if time.Now().Before(s.redialAt) {
		return nil, s.lastErr
	}
	dctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	c, err := dialH2(dctx, s.addr)
	if err != nil {
		s.lastErr, s.redialAt = fmt.Errorf("loadgen: %w", err), time.Now().Add(h2Redial)
		return nil, s.lastErr
	}
	if old := s.c.Swap(c); old != nil {
		old.close()
	}
	return c, nil
}

// invoke makes one call on the slot's connection, by ctx's deadline, in
// an h2Call of its own.
func (s *h2Slot) invoke(ctx context.Context, method string, req wireRequest, resp wireResponse) error {
	var k h2Caller
	return k.invoke(ctx, s, 0, method, req, resp)
}

func (s *h2Slot) close() {
	if c := s.c.Load(); c != nil {
		c.close()
	}
}
