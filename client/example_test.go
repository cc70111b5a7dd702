package client_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate/client"
)

// A server that is busy for its first request: the transport retries after
// a backoff draw (the server named no wait) and the caller sees only the
// answer. With Retry-After or a RateLimit field it would wait as long as
// asked, up to 30 s, and never past the request's deadline.
func ExampleNewTransport() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()

	httpClient := &http.Client{
		Transport: client.NewTransport(nil, client.WithMaxWait(10*time.Second)),
		Timeout:   time.Minute, // the transport never waits past it
	}
	resp, err := httpClient.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status, "after", calls.Load(), "requests")
	// Output: 200 OK after 2 requests
}

// Options are checked when the transport is built, but NewTransport has no
// error result: Validate says at start-up what every request would return.
func ExampleValidate() {
	err := client.Validate(client.WithMaxRetries(-1))
	fmt.Println(err)
	// Output: client: invalid option: WithMaxRetries(-1): want ≥ 0
}
