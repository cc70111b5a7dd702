package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync/atomic"
	"time"
)

// DefaultUpstreamTimeout is the default of Options.UpstreamTimeout, as
// nginx's proxy_read_timeout.
const DefaultUpstreamTimeout = 60 * time.Second

// ErrUpstreamTimeout is wrapped by the error of an upstream exchange cut
// because the upstream stayed silent for the upstream timeout.
var ErrUpstreamTimeout = errors.New("proxy: upstream timeout")

// silenceTransport cuts an upstream exchange that makes no progress for d:
// no request body byte sent and no response (headers, then body bytes)
// received within d of the last progress. A silent upstream is thus cut
// before its headers (the client gets 504) or in its body (the client's
// connection is aborted, so it sees a truncated response rather than a
// short one that looks whole); a slow but steady stream, such as
// server-sent events with a heartbeat, is not cut.
type silenceTransport struct {
	base http.RoundTripper
	d    time.Duration
}

func (t *silenceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	w := &watchdog{d: t.d, cancel: cancel, start: time.Now()}
	w.timer = time.AfterFunc(math.MaxInt64, w.check) // armed once w.timer is set: check uses it
	w.timer.Reset(t.d)
	out := r.WithContext(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		out.Body = &watchedBody{ReadCloser: r.Body, w: w}
	}
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		w.stop()
		cancel(nil)
		return nil, w.explain(ctx, err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// An upgraded connection (WebSocket) lives as long as its peers
		// want; its body must stay the io.ReadWriteCloser it is.
		w.stop()
		return resp, nil
	}
	w.touch()
	resp.Body = &watchedBody{ReadCloser: resp.Body, w: w, ctx: ctx}
	return resp, nil
}

// watchdog cancels an exchange when its last progress is d old. Progress
// is a store of the time; the timer rearms itself for what is left, so
// reads never touch the timer.
type watchdog struct {
	d      time.Duration
	cancel context.CancelCauseFunc
	start  time.Time
	last   atomic.Int64 // progress, as nanoseconds since start (monotonic)
	timer  *time.Timer
}

func (w *watchdog) touch() { w.last.Store(int64(time.Since(w.start))) }

func (w *watchdog) check() {
	if left := w.d - (time.Since(w.start) - time.Duration(w.last.Load())); left > 0 {
		w.timer.Reset(left)
		return
	}
	w.cancel(fmt.Errorf("%w: the upstream sent nothing for %s", ErrUpstreamTimeout, w.d))
}

func (w *watchdog) stop() { w.timer.Stop() }

// explain wraps err with the watchdog's cause when it cut the exchange.
func (w *watchdog) explain(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrUpstreamTimeout) {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// watchedBody is a request or response body whose reads are progress.
// A response body ends the exchange when it is closed.
type watchedBody struct {
	io.ReadCloser
	w   *watchdog
	ctx context.Context // the exchange's, for a response body; nil for a request body
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.touch()
	}
	if err != nil && err != io.EOF && b.ctx != nil {
		err = b.w.explain(b.ctx, err)
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.ReadCloser.Close()
	if b.ctx != nil {
		b.w.stop()
		b.w.cancel(nil)
	}
	return err
}
