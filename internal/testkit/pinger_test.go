package testkit

import (
	"testing"
	"time"
)

// A Pinger sees a server that does not answer, for as long as it does
// not, and sees it answer again.
func TestPingerSeesAStalledPath(t *testing.T) {
	srv := StartServer(t)
	p := StartPinger(t, srv.Addr())
	waitForPings(t, p, time.Now())
	srv.Pause(t)
	stalled := time.Now()
	const stall = 100 * time.Millisecond
	time.Sleep(stall)
	srv.Resume(t)
	if got := p.Slowest(stalled, stalled.Add(stall)); got < stall/2 { // a PING sent just after the stall began waits out the rest
		t.Errorf("Slowest over a %v stall = %v", stall, got)
	}
	waitForPings(t, p, time.Now())
}

// waitForPings waits until a PING sent after since has been answered.
func waitForPings(t *testing.T, p *Pinger, since time.Time) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(PingEvery) {
		p.mu.Lock()
		n := len(p.pings)
		ok := n > 0 && p.pings[n-1].sent.After(since) && p.pings[n-1].took < pingTimeout
		p.mu.Unlock()
		if ok {
			return
		}
	}
	t.Fatal("no PING answered")
}
