package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/algo"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// scriptRuns is how many script calls Redis has run since its statistics
// were last reset (EVALSHA and EVAL, less those that failed, such as a
// NOSCRIPT before the fallback to EVAL).
func scriptRuns(t *testing.T, client rueidis.Client) int {
	t.Helper()
	info, err := client.Do(context.Background(), client.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, line := range strings.Split(info, "\r\n") {
		name, stats, ok := strings.Cut(line, ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		for _, field := range strings.Split(stats, ",") {
			k, v, _ := strings.Cut(field, "=")
			n, _ := strconv.Atoi(v)
			switch k {
			case "calls":
				runs += n
			case "failed_calls", "rejected_calls":
				runs -= n
			}
		}
	}
	return runs
}

// Requests that arrive while a sender has been asked for a batch and has
// not yet taken it go in that batch, however many batches could still be
// in flight: the sender takes what has gathered when it runs. Here the
// first sender is held until all of them wait in the queue, so they are
// decided in one script call.
func TestRequestsArrivingBeforeTheSenderTakesShareItsCall(t *testing.T) {
	srv := testkit.StartServer(t)
	client := newTestClient(t, srv.Addr())
	l, err := New(Config{Addrs: []string{srv.Addr()}, Timeout: timing.Patience})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	release := make(chan struct{})
	var once sync.Once
	l.beforeTake = func(bool) { once.Do(func() { <-release }) }
	if err := client.Do(t.Context(), client.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	const callers = 12
	limit := floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 100, Period: time.Second, Burst: 100}
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			d, err := l.AllowN(t.Context(), fmt.Sprintf("arm:%d", i), limit, 1)
			if err != nil || !d.Allowed || d.Remaining != 99 {
				t.Errorf("caller %d: %+v, %v; want allowed with 99 left", i, d, err)
			}
		})
	}
	b := l.batchers[algo.TokenBucket]
	queued := func() int { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queue) }
	for deadline := time.Now().Add(timing.Patience); queued() < callers; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued after %v, want %d", queued(), timing.Patience, callers)
		}
	}
	close(release)
	wg.Wait()
	if got := scriptRuns(t, client); got != 1 {
		t.Errorf("%d requests made %d script calls, want 1", callers, got)
	}
}

// The sender of a lone caller takes its batch at once; a sender asked for
// while requests arrive together (the last batch had several) first lets
// the goroutines already runnable queue theirs.
func TestSendersYieldOnlyWhenRequestsArriveTogether(t *testing.T) {
	srv := testkit.StartServer(t)
	l, err := New(Config{Addrs: []string{srv.Addr()}, Timeout: timing.Patience})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	var yields []bool
	l.beforeTake = func(yield bool) { mu.Lock(); yields = append(yields, yield); mu.Unlock() }
	asked := func() []bool { mu.Lock(); defer mu.Unlock(); y := yields; yields = nil; return y }
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1000, Period: time.Minute}
	allow := func(key string) {
		if _, err := l.AllowN(t.Context(), key, limit, 1); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		allow(fmt.Sprintf("lone:%d", i))
	}
	if got := asked(); len(got) != 3 || got[0] || got[1] || got[2] {
		t.Errorf("a lone caller's senders yielded %v, want 3 times false", got)
	}
	// A batch of several, as the previous test makes one.
	b := l.batchers[algo.FixedWindow]
	b.mu.Lock()
	b.last = 5
	b.mu.Unlock()
	allow("after-a-batch")
	if got := asked(); len(got) != 1 || !got[0] {
		t.Errorf("after a batch of 5, the sender yielded %v, want true", got)
	}
	allow("lone-again")
	if got := asked(); len(got) != 1 || got[0] {
		t.Errorf("after a batch of 1, the sender yielded %v, want false", got)
	}
}
