package proxy

import (
	"net/http"
	"time"
)

// DefaultIdleConnsPerHost is how many idle connections to the upstream the
// default transport keeps. net/http keeps 2, which under concurrent load
// makes a proxy open and close a connection for most requests (and run
// out of ephemeral ports); a gateway has one upstream and wants a pool.
const DefaultIdleConnsPerHost = 512

// NewTransport returns the transport the proxy uses by default: net/http's
// defaults with a pool of idle upstream connections large enough for a
// gateway.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = DefaultIdleConnsPerHost
	t.MaxIdleConnsPerHost = DefaultIdleConnsPerHost
	t.IdleConnTimeout = 90 * time.Second
	return t
}
