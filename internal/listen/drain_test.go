package listen_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/floodgate-io/floodgate/internal/listen"
	"github.com/floodgate-io/floodgate/internal/testkit"
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
	ln := testkit.Loopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, listen.HTTP(d.HTTPServer(echo), ln)) }()

	load := testkit.StartKeepAliveLoad("http://"+ln.Addr().String()+"/", `{}`, 8)
	defer load.Stop()
	if err := load.WaitEach(timing.Patience, "been answered", func(c testkit.LoadTally) bool { return c.OK > 0 }); err != nil {
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
	if err := load.WaitEach(timing.Patience, "been answered with Connection: close twice", func(c testkit.LoadTally) bool {
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
	var logs testkit.SyncBuffer
	d := listen.NewDrain(opts, slog.New(slog.NewTextHandler(&logs, nil)))
	ln := testkit.Loopback(t)
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
