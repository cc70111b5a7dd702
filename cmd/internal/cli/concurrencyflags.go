package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/floodgate-io/floodgate/cmd/internal/observers"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/cmd/internal/proxy"
	"github.com/floodgate-io/floodgate/httplimit"
)

// The defaults of --queue and --max-wait. At the limit, a critical
// request without a queue is shed even while lower classes hold slots; a
// short queue, served highest class first, lets it take the next slot that
// frees instead. Measured at 3x an upstream's capacity (docs/adaptive.md,
// Evaluation): critical requests served 0.95–0.99 without a queue, 1.00
// with this one, for a p99 of served requests higher by less than the
// wait (1.4× to 1.7× the unloaded p99): a waiter of a lower class is shed
// after 25 ms rather than served late.
const (
	defaultQueue   = 20
	defaultMaxWait = 25 * time.Millisecond
)

// concurrencyFlags are the proxy's bulkhead and upstream breaker flags:
// --concurrency and its kin set the bulkhead of the one-line proxy, and
// with --config that of every route without a concurrency block of its
// own, each route its own.
type concurrencyFlags struct {
	fl        *pflag.FlagSet // to tell the flags given from the defaults
	limit     string
	algorithm string
	header    string
	queue     int
	breaker   proxy.BreakerOptions
	c         policy.Concurrency // MaxWait is --max-wait
}

func (f *concurrencyFlags) register(fl *pflag.FlagSet) {
	f.fl = fl
	fl.StringVar(&f.limit, "concurrency", "",
		"the most requests in flight to the upstream (per route with --config): adaptive (learned from latency), a number, or off (default: off)")
	fl.StringVar(&f.algorithm, "concurrency-algorithm", policy.DefaultConcurrencyAlgorithm,
		"with --concurrency adaptive: "+strings.Join(policy.ConcurrencyAlgorithms, ", "))
	fl.StringVar(&f.header, "priority-header", httplimit.DefaultPriorityHeader,
		"the request header of a request's class under --concurrency: critical, default or sheddable (sheddable is shed first; missing or unknown: default)")
	fl.IntVar(&f.queue, "queue", defaultQueue,
		"with --concurrency: how many requests may wait for a slot, highest class first (0: none wait, those over the limit get 503 at once)")
	durationVar(fl, &f.c.MaxWait, "max-wait", defaultMaxWait, false, "with --queue: the longest a request waits for a slot before it gets 503")
	fl.IntVar(&f.breaker.Failures, "upstream-breaker-failures", 0,
		"upstream failures in a row (5xx, no answer, --upstream-timeout) that open a route's circuit breaker: 503 until a probe succeeds (0: no breaker)")
	durationVar(fl, &f.breaker.CoolDown, "upstream-breaker-cool-down", proxy.DefaultBreakerCoolDown, false,
		"with --upstream-breaker-failures: how long an open breaker waits before it lets one probe request through")
}

// protection builds the proxy's Protection from the flags, reporting shed
// requests to obs under the policy name.
func (f *concurrencyFlags) protection(obs *observers.Set, name string) (proxy.Protection, error) {
	prot := proxy.Protection{Breaker: f.breaker}
	if f.breaker.Failures < 0 {
		return prot, fmt.Errorf("--upstream-breaker-failures %d: want 0 (off) or more", f.breaker.Failures)
	}
	c, err := f.concurrency()
	if err != nil {
		return prot, err
	}
	prot.Concurrency = c
	prot.Gate, err = httplimit.NewConcurrencyGate(httplimit.ConcurrencyOptions{PriorityHeader: f.header, Name: name, Observer: obs.Observer})
	if err != nil {
		return prot, fmt.Errorf("--priority-header: %w", err)
	}
	return prot, nil
}

// on reports whether --concurrency asks for a bulkhead: the one-line
// proxy then needs no --limit.
func (f *concurrencyFlags) on() bool { return f.limit != "" && f.limit != "off" }

// concurrency is the default bulkhead the flags describe; nil without
// --concurrency.
func (f *concurrencyFlags) concurrency() (*policy.Concurrency, error) {
	given := func(name string) bool { return f.fl != nil && f.fl.Changed(name) }
	c := f.c
	if !f.on() {
		for _, name := range []string{"concurrency-algorithm", "queue", "max-wait"} {
			if given(name) {
				return nil, fmt.Errorf("--%s needs --concurrency", name)
			}
		}
		return nil, nil
	}
	var err error
	if c.Limit, c.Off, err = policy.ParseConcurrencyLimit(f.limit); err != nil {
		return nil, fmt.Errorf("--concurrency %w", err)
	}
	switch {
	case !slices.Contains(policy.ConcurrencyAlgorithms, f.algorithm):
		return nil, fmt.Errorf("--concurrency-algorithm %q: want %s", f.algorithm, strings.Join(policy.ConcurrencyAlgorithms, ", "))
	case c.Limit > 0 && given("concurrency-algorithm"):
		return nil, fmt.Errorf("--concurrency-algorithm %s: --concurrency %d is fixed and learns nothing; give --concurrency adaptive", f.algorithm, c.Limit)
	case f.queue < 0 || f.queue > policy.MaxConcurrency:
		return nil, fmt.Errorf("--queue %d: want a whole number from 0 to %d", f.queue, policy.MaxConcurrency)
	case f.queue == 0 && given("max-wait"):
		return nil, fmt.Errorf("--max-wait %s needs --queue: without a queue no request waits", c.MaxWait)
	}
	if c.Limit == 0 {
		c.Algorithm = f.algorithm
	}
	if c.Queue = f.queue; c.Queue == 0 {
		c.MaxWait = 0
	}
	return &c, c.Check()
}

// concurrencyString renders the default bulkhead for the start's log line.
func concurrencyString(c *policy.Concurrency) string {
	if c == nil {
		return "off"
	}
	return c.String()
}
