// Package loadgen is the engine of `floodgate bench`: a load generator for
// rate-limit services that speaks the two protocols Floodgate serves, and
// gubernator's, to compare Floodgate with it.
//
//   - [TargetGRPC]: Envoy's envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit.
//     Each call asks about one descriptor {DescriptorKey: value} in Domain;
//     overall_code OK counts as allowed, OVER_LIMIT as denied.
//   - [TargetHTTP]: POST /v1/allow with a JSON body, either an explicit limit
//     for the key "DescriptorKey:value" (when [Config.Limit] is set) or a
//     policy lookup by domain and descriptor. 200 counts as allowed, 429 as
//     denied.
//   - [TargetGubernator]: gubernator's pb.gubernator.V1/GetRateLimits over
//     gRPC, one RateLimitReq per call: name Domain, unique_key
//     "DescriptorKey:value", hits Cost, and the limit of [Config.Limit]
//     (gubernator takes it from each call), behavior BATCHING, its default.
//     UNDER_LIMIT counts as allowed, OVER_LIMIT as denied, an error text as
//     an error. Its messages are encoded by hand (protowire), so gubernator
//     is not a dependency.
//
// Anything else (another status or overall code, a transport error, a
// timeout) counts as an error. The values are "0" .. Keys-1, drawn uniformly
// at random by each worker, so that a run exercises Keys distinct counters.
//
// [Run] drives Concurrency workers, either closed loop (each worker sends its
// next call as soon as the previous one is answered: the throughput the
// service sustains) or open loop at a fixed [Config.Rate] (calls are
// scheduled at start + i/Rate whatever the service does: the latency it
// gives at a given load). A run ends by itself after Duration, after
// Requests calls, or when its context is cancelled, whichever comes first.
//
// Latencies go to one log-bucketed (HDR-style) histogram per worker, so
// recording a call takes no lock and a fixed 16 KiB per worker however long
// the run; the histograms are merged once at the end. Percentiles are thus
// within 0.8% of the exact ones (exact below 128ns); Min, Mean and Max are
// exact.
package loadgen
