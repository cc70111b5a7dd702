// Package decisionlog is the decision log: an observe.Observer that writes
// one structured log/slog record per decision worth a look, in a field set
// that stays the same from release to release, so that a SIEM or an
// anomaly detector can ingest Floodgate's denials as security signals
// (credential stuffing on a login limit, a scraper walking through keys).
//
// It logs every denied, shadow-denied, shed and undecided (error)
// decision, every degraded one (a failure policy decided because the
// store did not answer), and allowed decisions only when sampled
// (Config.SampleAllowed, 0 by default). It is not an access log (allowed
// traffic is sampled at most) nor a metrics source (counts belong to the
// Prometheus observer, which sees every decision).
//
// # Records
//
// With a slog.JSONHandler each record is one line:
//
//	{"time":"2026-03-01T12:00:00Z","level":"WARN","msg":"floodgate decision","surface":"proxy","policy":"api","limit":"per_ip","key_hash":"3792a325fceb87e3","client":"203.0.113.7:52114","result":"denied","degraded":false,"remaining":0,"quota":100,"cost":1,"retry_after_ms":1500,"retry_after":2,"reset_after_ms":60000,"latency_us":42,"store_us":0}
//
// Every field but error is always present, in this order:
//
//	field           type    meaning                                                    example
//	time            string  when the decision was logged (RFC 3339, slog's)            "2026-03-01T12:00:00Z"
//	level           string  the record's level (see Levels)                            "WARN"
//	msg             string  always MsgDecision                                         "floodgate decision"
//	surface         string  what decided: serve, proxy, httplimit, grpclimit           "proxy"
//	policy          string  the policy (serve: the domain); "" for an explicit limit   "api"
//	limit           string  the limit's name within the policy                         "per_ip"
//	key_hash        string  16 hex digits of the key's SHA-256, or of its              "3792a325fceb87e3"
//	                        HMAC-SHA-256 under Config.Secret; "" for no key
//	key             string  instead of key_hash with Config.RawKeys: the key itself    "203.0.113.7"
//	client          string  the caller's address when the surface knows it, else ""    "203.0.113.7:52114"
//	result          string  allowed, denied, shadow_denied, shed or error              "denied"
//	degraded        bool    a failure policy decided because the store failed          false
//	remaining       int     units that could still pass now                            0
//	quota           int     the limit's capacity: a bucket's burst, a window's rate    100
//	cost            int     units the request asked for                                1
//	retry_after_ms  int     when denied, ms until this request would pass, rounded     1500
//	                        up; 0 when it passed, -1 when its cost never can
//	retry_after     int     the same in whole seconds rounded up, as HTTP's            2
//	                        Retry-After says it; -1 for never
//	reset_after_ms  int     ms until the key is back to its full, unused state         60000
//	latency_us      int     µs the surface took to decide the whole request            42
//	store_us        int     µs of latency_us spent waiting for the store, when         0
//	                        measured apart, else 0
//	error           string  only when there is one: why the request was undecided      "redis: connection refused"
//	                        or degraded
//
// The Logger's own attributes (slog.Logger.With) come before these; time
// is Config.Clock's when one is set, else the wall clock's.
//
// # Keys
//
// A key is the caller's input (an IP address, a user name, an API key), so
// the log holds its hash by default. A plain hash of a small space can be
// reversed by hashing every candidate: all IPv4 addresses take minutes.
// Set Config.Secret, a per-deployment secret of at least 16 bytes kept out
// of the log's reach, and key_hash becomes an HMAC that cannot be; use the
// same secret on every node whose records are correlated. KeyHash (or
// Logger.KeyHash) gives a key's hash, to search the log for it.
//
// # Rate limit
//
// A flood of denials must not become a flood of log lines, so the log has
// a token bucket of its own (Config.Rate records per second, Config.Burst
// at once; 100/s and twice the rate by default), counted by a
// floodgate.Memory on Config.Clock. Records beyond it are dropped and counted by result, and
// the first record considered once Config.SummaryInterval (10s by default)
// has passed since the last summary writes, before anything else, one
// summary of them (Flush writes it at once):
//
//	{"time":"2026-03-01T12:01:00Z","level":"WARN","msg":"floodgate decision log suppressed","suppressed":{"allowed":0,"denied":998,"shadow_denied":0,"shed":0,"error":0},"suppressed_total":998,"interval_ms":60000}
//
// suppressed counts the dropped records by result (a count "unknown" is
// added for events with an outcome this package does not know),
// suppressed_total their sum, interval_ms the time since the previous
// summary (or since New).
//
// # Cost
//
// Observe runs on the request's goroutine. A decision that is not logged
// (allowed and not sampled, or dropped by the rate limit) allocates nothing
// and takes no lock: sampling draws from math/rand/v2's per-thread
// generator rather than counting "1 in N" on a shared counter, which every
// core would write (and which would alias with periodic traffic), and a
// dropped record reads the monotonic clock and one atomic (when the
// bucket reopens; only records that may be written take the bucket's
// lock) and adds one to a counter picked at random among 16, so that
// cores do not write the same cache line. A written record
// costs what the slog handler costs, and the handler writes synchronously:
// a slow writer (a file on a busy disk, a pipe nobody reads) slows the
// requests that are logged. Give the handler a writer that buffers (a log
// shipper reading a pipe or socket, or a bufio.Writer behind a mutex that
// a timer flushes), and keep Rate at what the writer sustains.
package decisionlog
