package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/floodgate-io/floodgate/adaptive"
	"github.com/floodgate-io/floodgate/httplimit"
)

// A handler behind a concurrency limit of 10: at the limit, sheddable
// requests are turned away first, with 503 and Retry-After. A learned limit
// (adaptive.NewGradient2, NewAIMD, NewVegas) goes in the same place.
func ExampleConcurrency() {
	alg, err := adaptive.NewFixed(10)
	if err != nil {
		panic(err)
	}
	l, err := adaptive.NewLimiter(adaptive.LimiterOptions{Algorithm: alg})
	if err != nil {
		panic(err)
	}
	shed, err := httplimit.Concurrency(l, httplimit.ConcurrencyOptions{})
	if err != nil {
		panic(err)
	}
	h := shed(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	// Seven requests in flight fill sheddable's share (70% of 10).
	var busy []adaptive.Token
	for range 7 {
		t, _ := l.TryAcquire(adaptive.Critical)
		busy = append(busy, t)
	}
	for _, class := range []string{"sheddable", "critical"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Priority", class)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%s: %d Retry-After: %q\n", class, w.Code, w.Header().Get("Retry-After"))
	}
	for _, t := range busy {
		t.Ignore()
	}
	// Output:
	// sheddable: 503 Retry-After: "1"
	// critical: 200 Retry-After: ""
}
