package metrics

import (
	"context"
	"errors"
	"net"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
)

// kind is the kind label of floodgate_store_errors_total.
type kind int

// The kinds of store errors.
const (
	// timeout: the store did not answer in time (the store's own timeout,
	// or the caller's deadline passing while it waited).
	timeout kind = iota
	// connection: the store could not be reached (floodgate.ErrStoreUnavailable
	// without a timeout: refused, reset, not yet connected).
	connection
	// script: Redis answered with an error (a script's error, a wrong
	// type, out of memory): a defect or a misconfigured Redis, not an
	// outage.
	script
	// other: any other failure.
	other
	numKinds
)

var kindNames = [numKinds]string{"timeout", "connection", "script", "other"}

func (k kind) String() string { return kindNames[k] }

// classify returns the kind of a decision's error, and false for one that
// is not the store's failure: none, the caller's bad input (an invalid
// key, cost or limit), the caller giving up (context.Canceled), and an
// open circuit breaker, which did not call the store at all (its
// failures were counted when they happened). It allocates nothing, so
// that an outage's flood of errors costs no more than its decisions.
func classify(err error) (kind, bool) {
	switch {
	case err == nil,
		errors.Is(err, floodgate.ErrInvalidKey),
		errors.Is(err, floodgate.ErrInvalidCost),
		errors.Is(err, floodgate.ErrInvalidLimit),
		errors.Is(err, context.Canceled),
		errors.Is(err, failover.ErrBreakerOpen):
		return 0, false
	case errors.Is(err, context.DeadlineExceeded) || anyInChain(err, isNetTimeout):
		return timeout, true
	case errors.Is(err, floodgate.ErrStoreUnavailable):
		return connection, true
	case anyInChain(err, isRedisErr):
		return script, true
	}
	return other, true
}

func isNetTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func isRedisErr(err error) bool {
	_, ok := rueidis.IsRedisErr(err)
	return ok
}

// anyInChain reports whether match holds for err or any error it wraps,
// as errors.As would find it but without As's allocation of its target.
func anyInChain(err error, match func(error) bool) bool {
	for err != nil {
		if match(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if anyInChain(e, match) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
