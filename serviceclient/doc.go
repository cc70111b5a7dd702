// Package serviceclient is a Go client for the Floodgate service
// (floodgate serve): it asks the service for decisions over HTTP
// (POST /v1/allow) or over Envoy's rate limit gRPC API
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit), so that a
// Go program shares the limits every other caller of the service counts.
//
// Two kinds of decision:
//
//   - explicit limits, a key and a floodgate.Limit the caller states
//     (Client.AllowN, HTTP only: Envoy's API can state only fixed windows).
//     A *Client is a floodgate.Limiter, so it goes wherever one does:
//     floodgate.Wait, httplimit, failover.New;
//   - policy decisions (Client.Decide): a domain and descriptors that the
//     service looks up in its policy, with a result per descriptor.
//
// What the client adds to a plain call:
//
//   - A local cache of keys over their limit. A denial with a RetryAfter r
//     is answered here, denied, without a call, until exactly r after the
//     answer arrived (by Options.Clock), never after: at that instant the
//     request could pass, so the service is asked again. Only answers that
//     carry a RetryAfter are cached, so only HTTP's (Envoy's gRPC answer
//     gives duration_until_reset, the time to a full reset, which for a
//     bucket is longer than the wait: caching it would deny requests the
//     service would admit). The cache is a fixed table of Options.CacheSize
//     slots (default DefaultCacheSize) indexed by a hash of the key: a new
//     denial replaces whatever its slot held, so memory is bounded and a
//     forgotten key only costs a call, never a wrong answer.
//   - Batching (Options.Batch, gRPC only): concurrent Decide calls for the
//     same domain are sent as one ShouldRateLimit with all their
//     descriptors and the answer is split back. The service decides each
//     descriptor on its own unless it runs with --atomic, so a batch
//     decides exactly what the calls would have one by one. Against a
//     service with --atomic, do not batch: one caller's descriptor over its
//     limit would deny every other caller's in the batch. HTTP is never
//     batched, because /v1/allow decides a request's descriptors all or
//     nothing.
//   - A timeout (Options.Timeout) and a fallback when the service does not
//     answer within it (Options.Fallback, failover's modes): FailOpen
//     allows, FailClosed denies with a RetryAfter, FailLocal (explicit
//     limits only) enforces the limit divided by Nodes in a local Memory.
//     Explicit decisions run through failover.New, with its circuit
//     breaker, so the fallback of AllowN is exactly failover's; the cause is
//     noted in the context's observe.Notes (observe.NoteDegraded). Policy
//     decisions report it in Result.Degraded.
//
// It is not a rate limiter of its own: without the service it decides
// nothing but its fallback.
package serviceclient
