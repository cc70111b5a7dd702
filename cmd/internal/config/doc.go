// Package config is Floodgate's policy language: it decodes the YAML that
// says which limits apply to which requests into the run-time model of
// package cmd/internal/policy, which answers, for a request's descriptors,
// which limits apply. Only the command line and tests use it: a request
// never comes back here.
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
//	  - key: path
//	    value: /api/*/action        # a "*" anywhere, once or more: /api/x9/action, svc*ep*rpc
//	    rate_limit: {unit: minute, requests_per_unit: 50}
//
//	  - key: tenant
//	    value: free
//	    descriptors:                # nested: matches (tenant=free, user=<any>)
//	      - key: user
//	        shadow_mode: true       # count and report, never deny
//	        rate_limit: {unit: hour, requests_per_unit: 1000, name: free_user}
//
// The fields of a descriptor: key (required), value, rate_limit, descriptors,
// shadow_mode, quota_mode (a soft limit: exceeding it marks its descriptor
// OVER_LIMIT, and an Envoy request is over the limit only when every
// descriptor with a quota is, as in Envoy's service; elsewhere it is
// reported, not denied), detailed_metric and value_to_metric (metric names, see
// [policy.Rule.MetricKey]), share_threshold (only on a wildcard: every value
// it matches shares one counter, in its metric name too) and metadata (any mapping, handed to the
// caller with the rule). The fields of a rate_limit: unit and
// requests_per_unit, or unlimited: true; name; replaces, a list of {name: n}
// naming limits this one replaces when both apply to one request. A
// requests_per_unit of 0 denies every request, as in Envoy ([policy.Rule.DeniesAll]).
// Week is 7 days, month 30 days and year 365 days, as envoyproxy/ratelimit
// counts them. Over Envoy's gRPC API a descriptor that reaches an unlimited
// limit answers OK with limit_remaining 4294967295 and no current_limit
// (one nothing applies to: 0), and a fixed window's duration_until_reset is
// in whole seconds, as Envoy's service gives them.
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
//	        strategy: exact           # how a fleet shares it (see [policy.Strategies]), or with parameters:
//	                                  #   strategy: {name: synced, interval: 250ms}
//	                                  #   strategy: {name: sampled, one_in: 20}
//
// Without algorithm a limit is a fixed window aligned to the Unix epoch,
// which is how Envoy's service counts. Without strategy it follows the
// service's --strategy (exact by default); interval is T for leased, synced
// and gossip, one_in is 1/p for sampled, and a parameter the strategy does
// not take is an error (package cluster documents each strategy's bounds).
//
// # Requests and units
//
// A limit counts units, the default, or requests:
//
//	descriptors:
//	  - key: api_key
//	    rate_limits:
//	      - {name: rpm, counts: requests, unit: minute, requests_per_unit: 60}
//	      - {name: tpm, algorithm: sliding_window, unit: minute, requests_per_unit: 10000}  # counts: units
//
// A request's cost (Envoy's hits_addend, the cost of /v1/allow or of a
// route) is charged to every limit that counts units; a limit with counts:
// requests is charged 1 per request whatever the cost. So one descriptor
// limits requests per minute and tokens per minute together, and the caller
// sends the token count as the cost: above, a request of 500 tokens takes 1
// from rpm and 500 from tpm. A cost of 0 reads both kinds without counting.
// Units is the default because Envoy's service charges hits_addend to its
// one limit: its configurations count unchanged. A request may also give
// named limits costs of their own (a route's costs, below; a descriptor's
// costs in the service's /v1/allow): a cost given by name wins over what
// the limit counts.
//
// # Matching
//
// A request's descriptors walk the tree one entry per level, as
// envoyproxy/ratelimit walks it: key and value, else the first wildcard in
// file order that the value matches (a "*" stands for any run of
// characters, the empty one included, wherever it is and however many
// there are), else key alone, never backtracking; the limits that apply are
// those of the descriptor the last entry reaches. Package cmd/internal/policy,
// which does the matching, states the rules in full.
//
// # Routes
//
// `floodgate proxy --config` puts a file's limits in front of a backend. Its
// routes section says which requests a domain limits, and how a request
// becomes that domain's descriptors and a cost:
//
//	domain: gateway
//	trusted_proxies: [127.0.0.1/32]  # whose X-Forwarded-For / Forwarded "from: ip" believes
//	descriptors:
//	  - key: client
//	    rate_limit: {unit: second, requests_per_unit: 20}
//	  - key: api_key
//	    descriptors:
//	      - key: method
//	        rate_limit: {unit: minute, requests_per_unit: 600}
//	  - key: route
//	    value: upload
//	    rate_limit: {unit: minute, requests_per_unit: 100}
//	routes:
//	  - name: health                 # for logs and errors; default routes[i]
//	    path_prefix: /healthz
//	    descriptors: []              # matched, never limited
//	  - name: uploads
//	    host: "*.example.com"        # exact, or *.suffix; any host when left out
//	    path_prefix: /upload         # at a segment boundary: /upload, /upload/x, not /uploads
//	    methods: [POST, PUT]         # any method when left out
//	    cost: {header: X-Upload-MB}  # or a whole number; 1 when left out
//	    descriptors:
//	      - entries:
//	          - {key: route, value: upload}      # a constant
//	  - name: api
//	    host: api.example.com
//	    descriptors:
//	      - entries:
//	          - {key: client, from: ip}          # ip, header:NAME, path, method or host
//	      - if_missing: skip                     # deny (the default) answers 400
//	        entries:
//	          - {key: api_key, from: "header:X-API-Key"}
//	          - {key: method, from: method}
//
// A request takes the first route that matches its host, path and method:
// the routes of one file in order, files in the order they are loaded (a
// directory's in name order). A request no route matches is forwarded
// unlimited; end with a route without host, path_prefix and methods to
// limit everything. A matched request is decided for all its route's
// descriptors at once, all or nothing, like a request to the service
// carrying the same descriptors.
//
// An entry's value is a constant (value) or a part of the request (from):
// the client's address (an IPv6 client by its /64; the forwarding headers
// are read only from peers in trusted_proxies, as far back as the hops
// stay trusted), a header's first value, the URL path, the method, or the
// host without its port. A descriptor whose request lacks a value (no
// such header) is refused with 400 naming the entry, or dropped with
// if_missing: skip. A cost from a header must be a whole number of at
// least 1; anything else is refused with 400.
//
// A route's cost goes to the limits that count units; those that count
// requests take 1 (see Requests and units). costs gives the limits it
// names costs of their own, whatever they count: a whole number of at
// least 0 (0 reads the limit without counting) or a request header's:
//
//	domain: llm
//	descriptors:
//	  - key: api_key
//	    rate_limits:
//	      - {name: rpm, counts: requests, unit: minute, requests_per_unit: 60}
//	      - {name: tpm, unit: minute, requests_per_unit: 10000}
//	      - {name: images, unit: day, requests_per_unit: 50}
//	routes:
//	  - name: images
//	    path_prefix: /v1/images
//	    cost: {header: X-Tokens}           # tpm: the units limits the route does not name
//	    costs:
//	      images: {header: X-Images}       # the header's number
//	      rpm: 2                           # counts requests, but this route counts 2
//	    descriptors:
//	      - entries: [{key: api_key, from: "header:X-API-Key"}]
//
// Each name must be the name of a limit of the file's domain (loading
// says which names there are); a request takes it wherever one of its
// descriptors reaches a limit of that name.
//
// A cost can also be reconciled after the response, as LLM APIs need for
// tokens: `cost: {estimate: 1000, actual_trailer: X-Tokens-Used}` (or
// actual_header, and header instead of estimate) reserves the estimate when
// the request is decided, then charges or gives back the difference the
// upstream reports, past the limit if need be, never below empty. The
// difference goes to the limits that count units and that costs does not
// name: a request is still one request, and a named cost is no estimate.
// A response without a usable amount keeps the estimate (and is logged).
//
// A route's concurrency block is its bulkhead in `floodgate proxy`: how
// many of its requests may be in flight to the upstream at once, so that
// one slow route cannot take every slot (policy.Concurrency):
//
//	routes:
//	  - name: reports
//	    path_prefix: /reports
//	    descriptors: []
//	    concurrency:
//	      limit: adaptive      # required: adaptive, a whole number, or off (exempt from --concurrency)
//	      algorithm: gradient2 # with adaptive: gradient2 (default), aimd or vegas
//	      queue: 20            # how many may wait for a slot; 0 (default): shed at once
//	      max_wait: 50ms       # the longest wait in the queue; default 100ms with a queue
//
// A route without the block takes the proxy's --concurrency flags.
//
// Loading checks each route descriptor against the domain's tree: keys
// that can reach no descriptor with a limit (a misspelt key, entries in the
// wrong order, stopping above the limit) are an error, with the line.
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
