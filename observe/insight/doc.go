// Package insight answers an operator's first questions about a rate
// limiter, per policy and in bounded memory: who is being limited, who is
// close to their limit, and did something just change? An *Insight is an
// observe.Observer: give it to a surface (floodgate serve, the proxy,
// httplimit, grpclimit) beside the metrics, and read it through its
// methods or through Handler's JSON endpoints on an admin listener.
//
// It is not a metrics exporter (the telemetry module is), not a decision
// log (observe/decisionlog is), and not exact: it trades exactness for a
// memory bound that no key, limit or policy name an attacker sends can
// grow, with the error stated below.
//
// # Top consumers
//
// Per policy, the keys that used the most units over the last Window
// (default 1 minute), ranked by admitted units (Allowed decisions) and by
// denied units (Denied and ShadowDenied) apart. Each is a weighted
// Space-Saving summary (Metwally, Agrawal, El Abbadi 2005) of K counters
// (Counters, default 128) per sub-interval (Window/Slots, default 6 of
// 10 s), so the window slides in steps of one sub-interval: it covers the
// current, partial one and the Slots−1 before it.
//
// The guarantee, for one sub-interval of N units: every key's count
// over-estimates its true units by at most its error, and every error is
// at most N/K; every key with more than N/K units holds a counter, so it
// is listed when n = K. The window merges its sub-intervals: a key counts
// each sub-interval's count (and error) where it holds a counter, and that
// sub-interval's smallest count (as both count and error) where it does
// not. So, with N now the units of the whole window: for every entry,
// count − error ≤ true units ≤ count, and error ≤ N/K; every key with more
// than N/K units is among the merged candidates, and every key with more
// than 2N/K units is in the top K (a key ranked above it has more than
// N/K true units, and fewer than K keys can). TopList carries N (sampled;
// total is the exact units of every decision, the same unless sampled),
// K (counters) and N/K (max_error) so that a reader can judge a list. In
// the package's tests on Zipf traffic (skews 1.05 to 2, 300,000 requests
// over up to 41,000 distinct keys, 6 sub-intervals, K = 128 or 32) the
// top 10 listed were the true top 10 every time.
//
// Under sampling (observe.Sampler: above its FullRate decisions a second,
// one decision in N is timed and weighs N; the others are Untimed), the
// summaries count the timed decisions alone, each for Weight·Cost units:
// a weighted sample whose sums are unbiased. The bounds above then hold
// for the sampled units X̂ of each key, and the sampling adds its own
// error: for a key of X true units, with costs of at most c and N the
// largest sampling period over the window, |X̂ − X| ≤ √(2·N·c·X·ln(2/δ))
// + (2/3)·N·c·ln(2/δ) with probability 1 − δ (Bernstein's inequality;
// for δ = 10⁻⁶, about √(29·N·c·X) + 10·N·c). A key's relative error is
// so about √(29·N·c/X): small for the heavy hitters, which is what the
// list is for. Each entry's stated errors include it: solved for X, the
// bound turns count − error ≤ X̂ ≤ count into count − error ≤ X ≤ count
// + error_above, with probability 1 − 10⁻⁶, and the list names
// N (sampling_period). The list's total stays exact: every decision's
// units are counted, timed or not; sampled is then the summaries' N, an
// estimate of it, and max_error bounds the Space-Saving part of each
// error alone. In the package's tests (Zipf skews 1.1 and 1.5, 300,000
// decisions at 10,000 a second under a FullRate of 500, N ≈ 20) the top
// 10 listed were the true top 10 and every count was within its errors.
// Below FullRate every decision is timed and the bounds are as above.
//
// Policies are bounded too: MaxPolicies (default 1000) are tracked one by
// one, in the order they first appear; the events of any further policy
// are counted together under OtherPolicy ("_other"). An event without a
// policy is tracked under NoPolicy ("_none").
//
// # Near-limit keys
//
// A key whose last decision left it at or above NearLimitRatio (default
// 0.8, envoyproxy/ratelimit's NEAR_LIMIT_RATIO) of a limit (Event.Used) is
// on the near-limit list, per policy and limit, with its share used, its
// remaining units, the limit and when it resets (the decision's
// ResetAfter after its time). It leaves when a later decision shows it
// below the ratio (a timed one: an untimed decision below the ratio is
// counted without looking the key up) or when its reset time passes; an Error decision says
// nothing and changes nothing. The list holds MaxNearLimit keys (default
// 1000) over all policies: when it is full, a new key takes the place of
// its own policy's key that resets soonest, if that one resets before it;
// otherwise the new key is dropped and counted (near_limit_dropped). Each
// policy also counts its near-limit decisions: the Allowed ones that left
// their key at or above the ratio (envoyproxy/ratelimit's near_limit).
//
// # Spikes
//
// Per policy, two signals are counted in 1-second buckets: decisions
// (every outcome) and denials (Denied and ShadowDenied). Each second,
// once it is over, feeds a baseline: an exponentially weighted moving mean
// and variance with α = 1 − e^(−1s/τ), τ = SpikeTimeConstant (default
// 1 minute, α ≈ 0.0165). After SpikeWarmUp (default 1 minute) a second
// starts a spike when its rate r is above the baseline mean m by all of:
// SpikeZ standard deviations (default 4; the deviation is at least √m and
// at least 1, as counts of independent arrivals vary by √m), SpikeMinDelta
// per second (default 10: 2 → 6 per second is no spike) and a factor of
// SpikeMinRatio (default 1.5). The spike ends on the first second that is
// no longer above half of each threshold (the hysteresis stops a rate at
// the threshold from flapping). While it lasts, the baseline is frozen, so
// that the spike cannot raise the bar it is measured against; a spike that
// lasts 10τ is taken as the new normal: it ends (new_baseline in its
// fields) and the baseline restarts from the current rate. Only rises are
// spikes; a fall is not reported.
//
// Nothing runs in the background: seconds and sub-intervals close lazily,
// on the policy's next Observe or on a query, so a spike on an idle policy
// ends when it is next read. Idle seconds count as zero, up to 10τ of them.
//
// # Events
//
// Spikes are recorded as events of kind "spike_start" and "spike_end",
// with fields signal (decisions|denials), rate (the second's), baseline_mean
// and z; a spike_end adds peak and seconds. The owner records its own with
// Record (a configuration reload, a breaker's state). The last MaxEvents
// (default 256) are kept, and each is handed to Options.OnEvent.
//
// # HTTP
//
// Handler serves four GET endpoints, answering JSON (snake_case names).
// Every parameter is optional, may be given once, and is checked: a bad
// or unknown one is answered 400, an unknown policy 404, both with an
// application/problem+json body whose detail names it. Keys are shown raw,
// or under Options.HashKeys as the first 16 hex digits of their SHA-256.
// Handler does no authentication: mount it behind the admin listener's.
//
// GET /admin/top?policy=api&by=denied&n=5 lists the top n (default 10, at
// most Counters) keys of policy (default: every policy) by admitted or
// denied units (default: both, one list each):
//
//	{"lists":[{"policy":"api","by":"denied","window_seconds":60,"total":1200,
//	  "sampled":1200,"sampling_period":1,"counters":128,"max_error":9,
//	  "entries":[{"key":"mallory","count":800,"error":0,"error_above":0}]}]}
//
// GET /admin/near-limit?policy=api&n=50 lists the n (default 50, at most
// MaxNearLimit) most used near-limit keys of policy (default: every
// policy), the most used first:
//
//	{"ratio":0.8,"entries":[{"policy":"api","limit":"per-user","key":"mallory",
//	  "used":1,"remaining":0,"max":10,"reset_at":"2026-03-01T12:01:00Z",
//	  "seen_at":"2026-03-01T12:00:00Z"}]}
//
// GET /admin/events?since=2026-03-01T12:00:00Z&n=50 lists the n (default
// 50, at most MaxEvents) newest events at or after since (RFC 3339;
// default: all), newest first:
//
//	{"events":[{"seq":7,"time":"2026-03-01T12:03:01Z","kind":"spike_start",
//	  "policy":"api","message":"policy \"api\": decisions at 1000/s, 90.0 standard deviations above its baseline of 100.0/s",
//	  "fields":{"baseline_mean":100,"rate":1000,"signal":"decisions","z":90}}]}
//
// GET /admin/stats (no parameters) is the live view: per policy, the
// decisions and denials per second over the last RateWindow (default 5 s)
// of complete seconds, the spike baselines and the signals in a spike, the
// decisions since the start by outcome, and the near-limit figures:
//
//	{"time":"2026-03-01T12:03:02Z","policies":[{"policy":"api",
//	  "decisions_per_second":1000,"denials_per_second":12.4,
//	  "baseline":{"decisions":100,"denials":0.5},"spiking":["decisions"],
//	  "totals":{"allowed":51234,"denied":310,"error":0,"shadow_denied":0,"shed":0},
//	  "near_limit_decisions":95,"near_limit_keys":4}],
//	  "near_limit_keys":4,"near_limit_dropped":0,"events":7}
//
// # Cost
//
// An untimed event that leaves its key below NearLimitRatio takes no lock:
// it adds one to an atomic counter of its policy, by outcome, and its
// cost to another, by admitted or denied, which the next locked call
// folds into the totals, the current second's rates and the current
// sub-interval's units (so these and the top lists' totals stay exact
// under sampling). Any other event (timed, or near the limit, or the
// first of a new second, or costlier than any before it in the
// sub-interval: the sampling bound needs the largest cost) takes the
// locked path below.
//
// Observe takes its policy's lock and no other; the policy table is read
// without a lock, the first four policies by comparing their names (no
// hash), the others by a map lookup. It allocates nothing for a key already tracked, nor for
// a new key once its summary is full (it takes the least counter's place);
// until then, and for a key new to the near-limit list, it allocates the
// counter or entry (a counter is kept for reuse when its sub-interval is
// recycled). It reads no clock when Insight runs on the system clock and
// the event carries its Time (every surface's does), else the clock once.
// A summary finds a key with one hash, in an open-addressing index that
// key churn (a long tail replacing the least counter) does not degrade.
//
// Memory grows with the keys seen, up to 2·Slots·K counters per policy
// (1536 at the defaults: about 96 KB once every one is taken, 64 bytes a
// counter, plus the keys' own bytes; of it, the summaries' indexes, 24 KB,
// are taken when the policy is first seen), so the worst case is
// MaxPolicies times that (about 100 MB at the default 1000 policies: set
// MaxPolicies near the number of policies configured); the near-limit list
// adds about 150 bytes and a key per entry, up to MaxNearLimit.
package insight
