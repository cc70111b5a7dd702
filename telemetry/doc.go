// Package telemetry holds nothing itself: its module gathers the observers
// of Floodgate's decisions that need third-party libraries, so that the
// floodgate library module stays free of them. Import telemetry/metrics
// for Prometheus, telemetry/tracing for OpenTelemetry.
package telemetry
