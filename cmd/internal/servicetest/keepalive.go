package servicetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// KeepAliveLoad is clients that each POST one body to one URL in a loop
// over a keep-alive connection of their own, as a load balancer's or a
// service's pooled clients do, and tell apart how each request ended. It
// is the measure of a drain: requests that fail on a reused connection
// (EOF, "server closed idle connection") are the ones a drain must
// prevent; requests that fail on a new connection after the listener
// closed are expected.
type KeepAliveLoad struct {
	url, body string
	clients   []*loadClient
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	tick      chan struct{} // receives after a request ends
}

// LoadTally counts how requests ended.
type LoadTally struct {
	OK      int64 // answered, whatever the status
	Closing int64 // of OK, answered with Connection: close
	Refused int64 // failed on a new connection: nothing accepted it any more
	Failed  int64 // failed on a reused keep-alive connection
	Errors  []string
}

func (t LoadTally) String() string {
	return fmt.Sprintf("%d answered (%d with Connection: close), %d refused on a new connection, %d failed on a reused connection",
		t.OK, t.Closing, t.Refused, t.Failed)
}

type loadClient struct {
	ok, closing, refused, failed atomic.Int64
	mu                           sync.Mutex
	errors                       []string // the first few failures
}

// maxLoadErrors bounds the failures a client remembers.
const maxLoadErrors = 5

// StartKeepAliveLoad starts n clients POSTing body (JSON) to url.
func StartKeepAliveLoad(url, body string, n int) *KeepAliveLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &KeepAliveLoad{url: url, body: body, cancel: cancel, tick: make(chan struct{}, 1)}
	for range n {
		c := &loadClient{}
		l.clients = append(l.clients, c)
		l.wg.Go(func() { l.run(ctx, c) })
	}
	return l
}

func (l *KeepAliveLoad) run(ctx context.Context, c *loadClient) {
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	for ctx.Err() == nil {
		l.once(ctx, client, c)
		select {
		case l.tick <- struct{}{}:
		default:
		}
	}
}

// once sends one request and counts how it ended.
func (l *KeepAliveLoad) once(ctx context.Context, client *http.Client, c *loadClient) {
	var reused atomic.Bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused.Store(i.Reused) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, l.url, strings.NewReader(l.body))
	if err != nil {
		panic(err) // a bad URL is the test's own mistake
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	switch {
	case ctx.Err() != nil:
		// stopped by the test
	case err == nil:
		c.ok.Add(1)
		if resp.Close {
			c.closing.Add(1)
		}
	case errors.Is(err, syscall.ECONNREFUSED) || !reused.Load():
		c.refused.Add(1)
	default:
		c.failed.Add(1)
		c.mu.Lock()
		if len(c.errors) < maxLoadErrors {
			c.errors = append(c.errors, err.Error())
		}
		c.mu.Unlock()
	}
}

// Each returns each client's tally.
func (l *KeepAliveLoad) Each() []LoadTally {
	out := make([]LoadTally, len(l.clients))
	for i, c := range l.clients {
		c.mu.Lock()
		out[i] = LoadTally{OK: c.ok.Load(), Closing: c.closing.Load(), Refused: c.refused.Load(), Failed: c.failed.Load(),
			Errors: append([]string(nil), c.errors...)}
		c.mu.Unlock()
	}
	return out
}

// Total sums the clients' tallies.
func (l *KeepAliveLoad) Total() LoadTally {
	var t LoadTally
	for _, c := range l.Each() {
		t.OK += c.OK
		t.Closing += c.Closing
		t.Refused += c.Refused
		t.Failed += c.Failed
		t.Errors = append(t.Errors, c.Errors...)
	}
	return t
}

// WaitEach waits until every client's tally satisfies ok, or patience
// has passed (an error saying which clients did not).
func (l *KeepAliveLoad) WaitEach(patience time.Duration, what string, ok func(LoadTally) bool) error {
	deadline := time.NewTimer(patience)
	defer deadline.Stop()
	for {
		var behind []int
		for i, c := range l.Each() {
			if !ok(c) {
				behind = append(behind, i)
			}
		}
		if len(behind) == 0 {
			return nil
		}
		select {
		case <-l.tick:
		case <-deadline.C:
			return fmt.Errorf("after %v, clients %v of %d still had not %s: %v", patience, behind, len(l.clients), what, l.Each())
		}
	}
}

// Stop stops the clients and returns the total.
func (l *KeepAliveLoad) Stop() LoadTally {
	l.cancel()
	l.wg.Wait()
	return l.Total()
}

// ClosedAfter dials addr, sends what, then reads (discarding what the
// server sends) until the server closes the connection, and returns how
// long that took from the dial. It fails the test if the connection is
// still open after a minute: it measures a server's bound on connections
// that hold it (slow headers, a slow body, an idle keep-alive or HTTP/2
// connection).
func ClosedAfter(tb testing.TB, addr, what string) time.Duration {
	tb.Helper()
	began := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, what); err != nil {
		tb.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(time.Minute)) // bounds a hang only
	_, err = io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		tb.Fatalf("%s still open after a minute", addr)
	}
	return time.Since(began)
}
