package faults

import (
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/internal/testkit"
)

func TestProxyPassesAndInjectsFaults(t *testing.T) {
	srv := testkit.StartServer(t)
	p := StartProxy(t, srv.Addr())
	if r, err := testkit.Send(p.Addr(), "PING"); err != nil || r.String() != "PONG" {
		t.Fatalf("through the proxy: %v, %v", r, err)
	}
	p.AddLatency(t, 150)
	start := time.Now()
	if _, err := testkit.Send(p.Addr(), "PING"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("latency toxic: reply after %v", d)
	}
	p.Heal()
	p.AddResetPeer(t)
	if _, err := testkit.Send(p.Addr(), "PING"); err == nil {
		t.Fatal("reset_peer: the command went through")
	}
	p.Heal()
	p.Cut()
	if _, err := testkit.Send(p.Addr(), "PING"); err == nil {
		t.Fatal("cut: the command went through")
	}
	p.Restore(t)
	if r, err := testkit.Send(p.Addr(), "PING"); err != nil || r.String() != "PONG" {
		t.Fatalf("after restore: %v, %v", r, err)
	}
}
