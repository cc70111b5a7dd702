package servicetest

import (
	"context"
	"net"
	"testing"
)

// Loopback listens on a free port of 127.0.0.1, failing the test if it
// cannot.
func Loopback(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return ln
}

// Serve runs serve in the background until the test ends, then cancels its
// context, waits for it to return and fails the test if it returned an
// error: for servers that stop when their context is done.
func Serve(tb testing.TB, serve func(ctx context.Context) error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			tb.Errorf("serving: %v", err)
		}
	})
}
