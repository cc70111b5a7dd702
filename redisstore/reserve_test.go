package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/redisstore"
)

// The Redis store does not reserve: floodgate.Reserve on it fails, for
// every algorithm, with an error wrapping ErrNotReservable, and takes
// nothing from the key (it does not ask Redis at all). Its scripts answer
// a decision, not the key's state, which Cancel would need to tell what
// came after the reservation; Adjust gives units back instead.
func TestReserveOnRedisIsNotReservable(t *testing.T) {
	srv := testkit.StartServer(t)
	l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}, KeyPrefix: "fg:"})
	for _, a := range floodgate.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			limit := floodgate.Limit{Algorithm: a, Rate: 5, Period: time.Hour}
			r, err := floodgate.Reserve(ctx, l, "reserve", limit, 2)
			if !errors.Is(err, floodgate.ErrNotReservable) || r != nil {
				t.Fatalf("Reserve on Redis: %v, %v; want an error wrapping ErrNotReservable", r, err)
			}
			d, err := l.AllowN(ctx, "reserve", limit, 0)
			if err != nil || d.Remaining != 5 {
				t.Fatalf("after the refused Reserve: %+v, %v; want the key untouched (Remaining 5)", d, err)
			}
		})
	}
}
