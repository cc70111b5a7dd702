package failover_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
)

// down is a store that is always unavailable.
type down struct{}

func (down) AllowN(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
	return floodgate.Decision{}, floodgate.ErrStoreUnavailable
}

func (down) AllowAll(context.Context, []floodgate.Request) ([]floodgate.Decision, error) {
	return nil, floodgate.ErrStoreUnavailable
}

// During an outage every mode still holds keys to the key-size policy: a
// key past floodgate.MaxKeyBytes is the caller's error (ErrKeyTooLong), not
// a decision of the failure policy, as when the store answers.
func TestOutageKeepsTheKeyPolicy(t *testing.T) {
	long := strings.Repeat("k", floodgate.MaxKeyBytes+1)
	for _, mode := range failover.Modes() {
		t.Run(string(mode), func(t *testing.T) {
			l, err := failover.New(down{}, failover.Config{Mode: mode, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for range 3 { // through the breaker opening
				if _, err := l.AllowN(context.Background(), long, floodgate.PerSecond(1), 1); !errors.Is(err, floodgate.ErrKeyTooLong) {
					t.Fatalf("error %v, want one wrapping floodgate.ErrKeyTooLong", err)
				}
			}
			if _, err := l.(floodgate.BatchLimiter).AllowAll(context.Background(), []floodgate.Request{{Key: long, Limit: floodgate.PerSecond(1), Cost: 1}}); !errors.Is(err, floodgate.ErrKeyTooLong) {
				t.Fatalf("AllowAll: error %v, want one wrapping floodgate.ErrKeyTooLong", err)
			}
		})
	}
}
