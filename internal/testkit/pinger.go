package testkit

import (
	"bufio"
	"net"
	"sort"
	"sync"
	"testing"
	"time"
)

// A Pinger measures the path to a Redis server apart from the client a
// test is about: it sends PING every PingEvery on a connection of its own
// (redialled when it fails) and remembers how long each took to answer.
// When the client under test misses a deadline and the Pinger's PINGs
// through the same address were slow then too, the path (the kernel, a
// proxy, the server) was slow, not the client.
type Pinger struct {
	addr string

	mu      sync.Mutex
	pings   []ping    // answered or failed, in the order sent
	pending time.Time // when the PING in flight was sent; zero if none

	stop chan struct{}
	done chan struct{}
}

type ping struct {
	sent time.Time
	took time.Duration // until answered, or until it failed
}

// PingEvery is how often a Pinger sends PING.
const PingEvery = 2 * time.Millisecond

// pingTimeout bounds one PING and one dial.
const pingTimeout = time.Second

// maxPings bounds a Pinger's memory (about half an hour of PINGs).
const maxPings = 1 << 20

// StartPinger starts pinging addr until the test ends.
func StartPinger(tb testing.TB, addr string) *Pinger {
	tb.Helper()
	p := &Pinger{addr: addr, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	tb.Cleanup(func() {
		close(p.stop)
		<-p.done
	})
	return p
}

func (p *Pinger) run() {
	defer close(p.done)
	var conn net.Conn
	var r *bufio.Reader
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		select {
		case <-p.stop:
			return
		case <-time.After(PingEvery):
		}
		sent := time.Now()
		p.mu.Lock()
		p.pending = sent
		p.mu.Unlock()
		var err error
		if conn == nil {
			if conn, err = net.DialTimeout("tcp", p.addr, pingTimeout); err == nil {
				r = bufio.NewReader(conn)
			}
		}
		if err == nil {
			err = pingOnce(conn, r)
		}
		if err != nil && conn != nil {
			conn.Close()
			conn = nil
		}
		p.mu.Lock()
		if len(p.pings) < maxPings {
			p.pings = append(p.pings, ping{sent: sent, took: time.Since(sent)})
		}
		p.pending = time.Time{}
		p.mu.Unlock()
	}
}

func pingOnce(conn net.Conn, r *bufio.Reader) error {
	if err := conn.SetDeadline(time.Now().Add(pingTimeout)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	_, err := r.ReadString('\n')
	return err
}

// Slowest is the longest a PING took among those in flight at some time
// during [from, to] (one still unanswered counts until now).
func (p *Pinger) Slowest(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var slowest time.Duration
	// PINGs sent more than pingTimeout before from ended before it.
	i := sort.Search(len(p.pings), func(i int) bool { return !p.pings[i].sent.Before(from.Add(-2 * pingTimeout)) })
	for ; i < len(p.pings) && !p.pings[i].sent.After(to); i++ {
		if q := p.pings[i]; !q.sent.Add(q.took).Before(from) {
			slowest = max(slowest, q.took)
		}
	}
	if !p.pending.IsZero() && !p.pending.After(to) {
		slowest = max(slowest, time.Since(p.pending))
	}
	return slowest
}
