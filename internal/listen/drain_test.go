package listen_test

import (
	"context"
	"io"
	"net/http"
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
