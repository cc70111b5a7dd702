// Package erldiff holds a differential test of `floodgate serve` against
// envoyproxy/ratelimit itself: random descriptor configurations, written
// once and loaded by both, and random ShouldRateLimit sequences sent to
// both over gRPC, every answer compared field by field.
//
// The package is test-only (this file is its only non-test file). The test
// runs when FLOODGATE_ERL_BIN names an envoyproxy/ratelimit binary and is
// skipped otherwise; docs/envoy-ratelimit.md says how to build one, which
// variables size and steer a run, and which differences the comparison
// tolerates on purpose (the deliberate list in compare_test.go, each with
// its reason). Every other difference fails the test.
package erldiff
