// Package proxy is the gateway behind `floodgate proxy`: a reverse proxy
// that limits requests by the routes and descriptors of a policy set
// (package cmd/internal/policy), decided by the same engine as `floodgate serve`.
//
// A request takes the first route that matches its host, path prefix and
// method; the route turns it into descriptors of its domain and a cost,
// and the engine decides them all or nothing. The cost goes to the limits
// that count units, 1 to those that count requests, and the route's costs
// to the limits it names; a reconciled cost corrects only the units limits
// the route does not name. Admitted requests get the
// RateLimit-Policy and RateLimit fields and go upstream, their bodies
// streamed both ways and the upstream's headers kept; denied ones get 429,
// Retry-After and a problem+json body naming the violated limits. A
// leaky_bucket limit's Delay is honoured by holding the request. Requests
// no route matches are forwarded unlimited.
//
// Besides the rate limits, which protect the upstream from its callers,
// Options.Protection protects it from itself: each route (and the
// requests no route matches) gets a bulkhead, an adaptive.Limiter of its
// own built from its concurrency block or the proxy's default, so that one
// slow route cannot take every slot, and a circuit breaker on its
// upstream's failures. A request meets the open breaker first (503 with
// the time to its probe), then the rate limits (429), then the bulkhead
// (503 when it sheds the request, lower priority classes first).
package proxy
