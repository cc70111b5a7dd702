// Package client is the other half of a rate limit: an HTTP client
// transport that honours what a server says when it refuses a request, so
// that callers wait as asked instead of hammering a server that is already
// saying no.
//
//	httpClient := &http.Client{Transport: client.NewTransport(nil)}
//
// # What the transport does
//
// On a 429 Too Many Requests or a 503 Service Unavailable it retries the
// request (up to 3 times; WithMaxRetries) after the longest wait the
// response asks for, among:
//
//   - Retry-After, as delta-seconds or as an HTTP-date; a date is measured
//     from the response's own Date field, so that the skew between the
//     server's clock and the client's cancels out (from the client's clock
//     when the response has no Date);
//   - the t parameter of every policy at r=0 in the RateLimit field of
//     draft-ietf-httpapi-ratelimit-headers-10 (RateLimit-Policy is read for
//     the names);
//   - X-RateLimit-Reset, when X-RateLimit-Remaining is 0 or absent: a Unix
//     time in seconds when above 10^9 (GitHub's form, measured like a date),
//     delta-seconds otherwise.
//
// It never retries earlier than asked; it adds a backoff draw (below) to
// the wait so that clients refused together do not return together. A wait
// above the maximum (30 s; WithMaxWait) is not waited: the refusal goes back
// to the caller at once. A wait that would pass the request context's
// deadline is not started: RoundTrip fails at once with an error wrapping
// context.DeadlineExceeded (and ErrPastDeadline) that says what the server
// asked. A malformed field is logged at debug level and ignored.
//
// When the server asks for no wait, and after a transport error that a
// retry can cure (connection refused, reset or aborted, broken pipe, EOF, a
// timeout; never the caller's own cancellation or deadline), the wait is
// exponential backoff with full jitter: a uniform draw in
// [0, min(10 s, 100 ms·2^n)) before retry n (Backoff explains why full
// jitter).
//
// Only idempotent requests are retried: GET, HEAD, OPTIONS, TRACE, PUT and
// DELETE, and any request with an Idempotency-Key (or X-Idempotency-Key)
// header, as net/http's own transport treats them. WithRetryNonIdempotent
// retries other methods on 429 and 503 too, but never after a transport
// error, which may hide a request that was served. A request with a body is
// retried only if it has GetBody (http.NewRequest sets it for the usual
// in-memory bodies): a retry sends a new copy of the body, byte for byte.
// A request with a body and no GetBody is sent once. The responses that are
// not returned are drained (at most 64 KiB) and closed.
//
// # Not making an overload worse
//
// Retries amplify an overload: a client that retries 3 times sends up to 4
// times its load to a server already refusing it. Four mechanisms, each
// kept per host (the request URL's host) by the transport, prevent that:
//
//   - a retry budget (Budget; WithBudget, WithoutBudget): retries are at
//     most 10% of first attempts plus one a second (10 saved at most), as in
//     gRPC's retry throttling and Finagle's RetryBudget. With the budget
//     spent, a refusal goes back to the caller and a transport error is
//     returned wrapped in "retry budget exhausted".
//   - client-side adaptive throttling (Throttle; WithThrottle,
//     WithThrottleWindow, WithoutThrottle), Google SRE's: over the last 2
//     minutes, a request is rejected locally, not sent, with probability
//     max(0, (requests − K·accepts)/(requests + 1)), K = 2. RoundTrip then
//     returns an error wrapping ErrThrottled. Every call of RoundTrip counts
//     as a request (its retries do not: the budget bounds those), and as an
//     accept when one of its attempts gets an answer other than 429 and 503.
//   - a pre-emptive pause: when any response (a 200 too) says r=0 with t
//     seconds in its RateLimit field for a policy, the next requests the
//     transport sends to that host wait until then (plus a backoff draw)
//     instead of being sent to be refused. Pauses are kept per host and
//     policy name and end early when a response reports r > 0 for that
//     policy. A pause longer than MaxWait is not kept (the request goes);
//     one past the context's deadline fails at once, as above.
//   - a margin for a shared quota (Pauses.Learn): the transport compares
//     the smallest r of consecutive answers from a host; when r fell by
//     more than its own requests took in between, other clients share the
//     quota, and an r they would take before this client's next request
//     is as good as r=0. So it pauses at any r up to the most the others
//     took (the margin), as at r=0, and the margin halves every 8 of the
//     policy's t after the last such lesson. A client alone never learns
//     a margin; a client that sends concurrently counts its own requests
//     in flight as others' (it then pauses a little early).
//
// # Options
//
// NewTransport has no error result. An Option built with a bad value (a
// negative retry count, a zero wait, a K below 1...) does not panic and is
// not clamped: every RoundTrip of that transport fails, sending nothing,
// with an error wrapping ErrInvalidOption that names the option and the
// value. Validate reports the same error at start-up.
//
// WithClock and WithRand make the transport deterministic for tests: a
// manual clock and a sleeper that moves it instead of sleeping, and a
// seeded random source.
//
// # The pieces, for other transports
//
// Backoff, Policy (retry count, maximum wait, deadline), Budget, Throttle
// and Pauses know nothing of HTTP, and Resolve turns Options into their
// Settings: grpclimit's client interceptors read the server's wait from
// retry pushback, RetryInfo and the ratelimit metadata, and take the same
// Options and types.
//
// # Compared with go-retryablehttp and cenkalti/backoff
//
// hashicorp/go-retryablehttp is a client (with a RoundTripper adapter)
// that by default retries connection errors, 429 and most 5xx answers, 4
// times, for every method (it buffers bodies to replay them); on 429 and
// 503 it uses Retry-After as the wait instead of its backoff. It does not
// read the RateLimit fields, keeps no retry budget, does no throttling and
// leaves the caller's deadline to the request's context. cenkalti/backoff is a backoff library, not an HTTP
// client: exponential backoff with a randomisation factor (±50% by
// default, a band around the exponential curve rather than full jitter), a
// maximum elapsed time, and a Retry-After only if the caller returns it as
// a RetryAfter error. This package waits what the server asks (all three
// forms of it), never past the caller's deadline, jitters from zero, and
// spends at most a budget of retries; it retries only what is safe to
// repeat.
package client
