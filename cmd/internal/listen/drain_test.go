package listen_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/floodgate-io/floodgate/cmd/internal/listen"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo reads the body and answers 200.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = io.WriteString(w, "ok")
})

// manualGrace is a grace period the test ends by closing end.
type manualGrace struct{ end chan time.Time }

func (g manualGrace) after(time.Duration) <-chan time.Time { return g.end }

// TestDrainLosesNoKeepAliveRequest is the drain's promise: keep-alive
// clients sending continuously while the context ends see no request
// fail on a reused connection. During the grace period every answer says
// Connection: close, so each client moves to a new connection; when the
// listener closes, only new connections are refused.
func TestDrainLosesNoKeepAliveRequest(t *testing.T) {
	grace := manualGrace{end: make(chan time.Time)}
	opts := listen.Defaults()
	opts.ShutdownDelay = time.Hour // ended by hand
	d := listen.NewDrain(opts, nil).WithGrace(grace.after)
	ln := servicetest.Loopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, listen.HTTP(d.HTTPServer(echo), ln)) }()

	load := servicetest.StartKeepAliveLoad("http://"+ln.Addr().String()+"/", `{}`, 8)
	defer load.Stop()
	if err := load.WaitEach(timing.Patience, "been answered", func(c servicetest.LoadTally) bool { return c.OK > 0 }); err != nil {
		t.Fatal(err)
	}
	before := load.Total()
	if before.Closing != 0 {
		t.Fatalf("before the drain: %v; want no Connection: close", before)
	}

	cancel()
	<-d.Draining()
	// Each client is told to leave its connection, then comes back on a
	// new one (the listener still accepts) and is told again.
	if err := load.WaitEach(timing.Patience, "been answered with Connection: close twice", func(c servicetest.LoadTally) bool {
		return c.Closing >= 2
	}); err != nil {
		t.Fatal(err)
	}
	close(grace.end)
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v, want nil after a drain", err)
	}
	total := load.Stop()
	t.Logf("keep-alive load through the drain: %v", total)
	if total.Failed != 0 {
		t.Fatalf("%v; want none failed on a reused connection: %q", total, total.Errors)
	}
}

// A request still running when ShutdownTimeout has passed is cut and
// logged, and Serve still returns nil: a stuck handler does not turn a
// shutdown into a failure exit.
func TestDrainCutsWhatOutlivesTheShutdownTimeout(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	stuck := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	})
	opts := listen.Defaults()
	opts.ShutdownTimeout = 100 * time.Millisecond
	var logs servicetest.SyncBuffer
	d := listen.NewDrain(opts, slog.New(slog.NewTextHandler(&logs, nil)))
	ln := servicetest.Loopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, listen.HTTP(d.HTTPServer(stuck), ln)) }()

	answered := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	<-entered
	began := time.Now()
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v, want nil", err)
	}
	if took := time.Since(began); took < opts.ShutdownTimeout {
		t.Fatalf("Serve returned %v after the cancel, before the shutdown timeout %v", took, opts.ShutdownTimeout)
	}
	if err := <-answered; err == nil {
		t.Fatal("the stuck request was answered; want its connection cut")
	}
	if !strings.Contains(logs.String(), "still running after the shutdown timeout") {
		t.Fatalf("no log of the cut request: %q", logs.String())
	}
}

// A client that stops reading a response is cut once a write has waited
// SendTimeout, however long the response was meant to run; without the
// bound the handler would wait on it for ever.
func TestSendTimeoutCutsAClientThatStopsReading(t *testing.T) {
	opts := listen.Defaults()
	opts.WriteTimeout = 0 // a stream: no bound on the whole response
	opts.SendTimeout = 200 * time.Millisecond
	ended := make(chan error, 1)
	endless := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				ended <- err
				return
			}
		}
	})
	d := listen.NewDrain(opts, nil)
	ln := servicetest.Loopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, listen.HTTP(d.HTTPServer(endless), ln)) }()
	defer func() { cancel(); <-served }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing; the socket buffers fill, then a write waits.
	select {
	case err := <-ended:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("the handler's write failed with %v, want a timeout", err)
		}
	case <-time.After(timing.Patience):
		t.Fatalf("the handler still writes %v after its client stopped reading", timing.Patience)
	}
}
