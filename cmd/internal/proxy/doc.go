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
package proxy
