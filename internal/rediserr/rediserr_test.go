package rediserr_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/rediserr"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// TestClassify is the rule every Redis caller follows: who is to blame
// decides what the error wraps.
func TestClassify(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	timedOut, cancelTimeout := context.WithCancelCause(context.Background())
	storeTimeout := fmt.Errorf("store timeout: %w", floodgate.ErrStoreUnavailable)
	cancelTimeout(storeTimeout)
	dialErr := errors.New("dial tcp 127.0.0.1:1: connection refused")

	cases := []struct {
		name        string
		ctx         context.Context
		err         error
		want        []error // errors.Is must hold for each
		unavailable bool
	}{
		{"the caller gave up", canceled, dialErr, []error{context.Canceled}, false},
		{"the store's own timeout", timedOut, dialErr, []error{storeTimeout}, true},
		{"no answer", context.Background(), dialErr, []error{dialErr}, true},
		{"Redis answered with an error", context.Background(), redisError(t), nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := rediserr.Classify(c.ctx, "call", c.err)
			if !strings.HasPrefix(got.Error(), "call: ") {
				t.Errorf("error %q does not start with the call's name", got)
			}
			for _, w := range c.want {
				if !errors.Is(got, w) {
					t.Errorf("error %q does not wrap %v", got, w)
				}
			}
			if u := errors.Is(got, floodgate.ErrStoreUnavailable); u != c.unavailable {
				t.Errorf("errors.Is(%q, ErrStoreUnavailable) = %v, want %v", got, u, c.unavailable)
			}
		})
	}
}

// redisError returns the error a real Redis answers to an unknown command.
func redisError(t *testing.T) error {
	t.Helper()
	srv := testkit.StartServer(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	err = client.Do(context.Background(), client.B().Arbitrary("NOSUCHCOMMAND").Build()).Error()
	if _, ok := rueidis.IsRedisErr(err); !ok {
		t.Fatalf("Redis answered %v to an unknown command, want a Redis error", err)
	}
	return err
}
