// Package config is Floodgate's policy language: it reads the YAML that says
// which limits apply to which requests, and answers, for a request's
// descriptors, which limits apply.
//
// The language is the descriptor format of Envoy's reference rate limit
// service (github.com/envoyproxy/ratelimit), so existing configuration files
// load unchanged and match the same way, plus Floodgate's extensions.
//
// # Files
//
// A file holds one domain, a namespace of limits:
//
//	domain: api                     # required
//	descriptors:                    # a tree of descriptors
//	  - key: remote_address         # required
//	    rate_limit:
//	      unit: second              # second, minute, hour, day, week, month, year (any case)
//	      requests_per_unit: 10
//
//	  - key: remote_address
//	    value: 127.0.0.1             # a more specific match for one value
//	    rate_limit:
//	      unlimited: true           # never limited
//
//	  - key: path
//	    value: /files/*             # a trailing "*" matches every value with that prefix
//	    share_threshold: true       # ...and all of them count against one counter
//	    rate_limit: {unit: minute, requests_per_unit: 100}
//
//	  - key: tenant
//	    value: free
//	    descriptors:                # nested: matches (tenant=free, user=<any>)
//	      - key: user
//	        shadow_mode: true       # count and report, never deny
//	        rate_limit: {unit: hour, requests_per_unit: 1000, name: free_user}
//
// The fields of a descriptor: key (required), value, rate_limit, descriptors,
// shadow_mode, quota_mode (a soft limit: exceeding it is reported, not
// denied), detailed_metric and value_to_metric (metric names, see
// [Rule.MetricKey]), share_threshold (only on a wildcard value: every value
// it matches shares one counter) and metadata (any mapping, handed to the
// caller with the rule). The fields of a rate_limit: unit and
// requests_per_unit, or unlimited: true; name; replaces, a list of {name: n}
// naming limits this one replaces when both apply to one request. A
// requests_per_unit of 0 denies every request, as in Envoy ([Rule.DeniesAll]).
// Week is 7 days, month 30 days and year 365 days, as envoyproxy/ratelimit
// counts them.
//
// # Floodgate's extensions
//
// A rate_limit may also say how it counts, and a descriptor may carry several
// limits, all of which apply (burst and sustained, requests and tokens):
//
//	descriptors:
//	  - key: api_key
//	    rate_limits:                  # instead of rate_limit
//	      - name: burst
//	        algorithm: token_bucket   # or leaky_bucket, fixed_window (the default),
//	                                  #   sliding_log, sliding_window
//	        period: 1s                # a Go duration, instead of unit
//	        requests_per_unit: 10
//	        burst: 50                 # buckets only
//	      - name: sustained
//	        unit: hour
//	        requests_per_unit: 10000
//	        failure_mode: fail_open   # or fail_closed, fail_local (see package failover)
//	        strategy: exact           # the only one until the cluster strategies land (see [Strategies])
//
// Without algorithm a limit is a fixed window aligned to the Unix epoch,
// which is how Envoy's service counts.
//
// # Matching
//
// A request carries descriptors, each an ordered list of (key, value)
// entries; each descriptor is matched on its own, as envoyproxy/ratelimit
// does. The entries walk the tree one level each. At each level the entry
// takes, in this order: the descriptor with the same key and value; else the
// first descriptor, in file order, with the same key and a wildcard value the
// entry's value starts with; else the descriptor with the same key and no
// value. The walk never backtracks: when the chosen descriptor has no child
// for the next entry, nothing applies, even if another branch would have
// matched. The limits that apply are those of the descriptor reached by the
// last entry: a request with fewer entries stops above deeper limits, one
// with more entries goes past a limit set on an intermediate level, and in
// both cases that limit does not apply.
//
// # Differences from envoyproxy/ratelimit
//
// Deliberate, all on the side of refusing what is probably a mistake:
// requests_per_unit is required (Envoy reads a missing one as 0, which
// denies everything); an unlimited limit may not also give a unit, a rate or
// any other counting field; a file with several YAML documents is refused
// (Envoy reads the first and ignores the rest); burst on a window algorithm
// is refused. Keys and values are compared as pairs, so a key or a value
// containing "_" cannot collide with another pair the way Envoy's joined
// "key_value" strings can. Descriptors that carry their own limit in the
// request (Envoy's per-descriptor limit override) are the caller's business.
package config
