package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
	"github.com/floodgate-io/floodgate/redisstore"
)

// With DialInBackground, a Redis that is down at New is no error: the
// Limiter's calls fail with ErrStoreUnavailable (for a failure policy to
// decide) until Redis comes up, and are counted there from then on.
func TestDialInBackgroundWhileRedisIsDown(t *testing.T) {
	srv := testkit.StartServer(t)
	srv.Kill() // its port is known and free: Restart brings Redis up on it
	connected := make(chan struct{})
	dialErrs := make(chan error, 100)
	l, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, KeyPrefix: "bg:", Timeout: 2 * time.Second,
		DialInBackground: true, OnDial: func(err error) {
			if err == nil {
				close(connected)
				return
			}
			select {
			case dialErrs <- err:
			default:
			}
		}})
	if err != nil {
		t.Fatalf("New with Redis down and DialInBackground = %v, want a Limiter", err)
	}
	defer l.Close()
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 2, Period: time.Minute}
	ctx := context.Background()
	if _, err := l.AllowN(ctx, "k", limit, 1); !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("AllowN before Redis is up = %v, want ErrStoreUnavailable", err)
	}
	if err := l.Ping(ctx); !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("Ping before Redis is up = %v, want ErrStoreUnavailable", err)
	}
	if err := <-dialErrs; !errors.Is(err, floodgate.ErrStoreUnavailable) || !strings.Contains(err.Error(), srv.Addr()) {
		t.Fatalf("OnDial heard %v, want an unavailable store at %s", err, srv.Addr())
	}
	srv.Restart(t)
	select {
	case <-connected:
	case <-time.After(timing.Patience):
		t.Fatalf("no connection within %s of Redis coming up", timing.Patience)
	}
	for i, want := range []bool{true, true, false} {
		d, err := l.AllowN(ctx, "k", limit, 1)
		if err != nil || d.Allowed != want {
			t.Fatalf("decision %d after Redis came up = %+v, %v; want allowed %v", i, d, err, want)
		}
	}
	if got := srv.Do(t, "GET", "bg:k"); got == "(nil)" {
		t.Fatal("the decisions were not counted in Redis")
	}
}

// DialInBackground waits only for a Redis that does not answer: one that
// answers and refuses (here, a wrong password) fails New as without it.
func TestDialInBackgroundStillRefusesAWrongPassword(t *testing.T) {
	srv := testkit.StartServer(t, testkit.WithPassword("s3cret"))
	l, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, Password: "wrong", DialInBackground: true})
	if err == nil {
		l.Close()
		t.Fatal("New with a wrong password succeeded")
	}
	if !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("New = %v, want Redis's WRONGPASS", err)
	}
}

// Closing a Limiter that never reached Redis stops its background dials.
func TestDialInBackgroundClosedBeforeRedisIsUp(t *testing.T) {
	srv := testkit.StartServer(t)
	srv.Kill()
	dials := make(chan error, 1000)
	l, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, DialInBackground: true,
		OnDial: func(err error) { dials <- err }})
	if err != nil {
		t.Fatal(err)
	}
	<-dials
	l.Close()
	srv.Restart(t)
	if _, err := l.AllowN(context.Background(), "k", floodgate.PerSecond(1), 1); err == nil {
		t.Fatal("a closed Limiter decided")
	}
}
