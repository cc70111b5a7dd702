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
//     allows, FailClosed denies with a RetryAfter, FailLocal enforces the
//     limit divided by Nodes in a local Memory. Every decision, explicit
//     or policy, goes through one failover.New, so one circuit breaker
//     (failures of either kind open it, and while it is open neither
//     calls the service) and one local Memory serve both. The cause is
//     noted in the context's observe.Notes (observe.NoteDegraded); policy
//     decisions also report it in Result.Degraded.
//   - Limits for FailLocal's policy decisions. The client cannot see the
//     service's policy, so a policy descriptor's limits are those
//     Options.PolicyLimits gives (the caller's copy of the policy), else
//     those learned from the service's last answer for it (at most
//     Options.LearnedLimits descriptors): gRPC's current_limit (the
//     tightest limit, requests_per_unit per unit) or HTTP's
//     RateLimit-Policy field (every enforced limit, q per w), each
//     enforced as a token bucket of q per w. A descriptor without known
//     limits is decided by Options.UnknownLimit (FailOpen: it passes;
//     FailClosed: the decision is denied), or the decision fails with
//     ErrNoLocalLimit: never a silent default. The local decision of
//     several descriptors is all or nothing.
//
// It is not a rate limiter of its own: without the service it decides
// nothing but its fallback.
package serviceclient
