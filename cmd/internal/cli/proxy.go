package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/assemble"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/listen"
	"github.com/floodgate-io/floodgate/cmd/internal/observers"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/cmd/internal/proxy"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/httplimit"
	"github.com/floodgate-io/floodgate/observe"
)

type proxyFlags struct {
	storeFlags
	config     string
	maxDelay   time.Duration
	conflicts  []string // one-line flags given alongside --config
	upstream   string
	httpAddr   string
	limit      string
	algorithm  string
	burst      int64
	by         string
	missing    missingFlag
	trusted    []string
	logFormat  string
	logLevel   logLevel
	gcFloor    gcFloorFlag
	reload     reloadFlags
	listen     listenFlags
	observe    observeFlags
	adminAddr  string
	adminToken string
	fleetGiven []string // cluster flags given without --config
	conc       concurrencyFlags
}

func newProxyCmd() *cobra.Command {
	var f proxyFlags
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "A rate-limiting reverse proxy in front of a backend",
		Long: "Forwards requests to --upstream, limiting them per client address, header or path.\n" +
			"Denied requests get 429 with Retry-After, the RateLimit fields and a problem+json body.\n\n" +
			"With --config the limits are those of a policy file or directory: its routes map requests\n" +
			"(by host, path prefix and method) onto descriptors and a cost, decided by the same engine\n" +
			"as `floodgate serve`; the file is reloaded when it changes and on SIGHUP.\n\n" +
			"Every flag can also be set in the environment as FLOODGATE_ and its name in capitals with\n" +
			"underscores (--upstream-timeout is FLOODGATE_UPSTREAM_TIMEOUT; flags win). Limits, timeouts\n" +
			"and the drain on SIGTERM are in docs/operations.md.",
		Example: "  floodgate proxy --upstream http://127.0.0.1:3000 --limit 100/m --by header:X-API-Key\n" +
			"  floodgate proxy --upstream http://127.0.0.1:3000 --config policy.yaml --redis 127.0.0.1:6379\n" +
			"  floodgate proxy --upstream http://127.0.0.1:3000 --limit 10/s --burst 20 --by ip --trusted-proxies 127.0.0.1/32\n" +
			"  floodgate proxy --upstream http://127.0.0.1:3000 --limit 100/m --by header:X-API-Key --missing pass   # no key: not limited",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			for _, name := range oneLineFlags {
				if cmd.Flags().Changed(name) {
					f.conflicts = append(f.conflicts, "--"+name)
				}
			}
			for _, name := range fleetFlagNames {
				if cmd.Flags().Changed(name) {
					f.fleetGiven = append(f.fleetGiven, "--"+name)
				}
			}
			if f.config != "" {
				return runRoutedProxy(cmd.Context(), f, cmd.ErrOrStderr())
			}
			return runProxy(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "policy file or directory whose routes and descriptors say what to limit (instead of --limit and --by)")
	fl.StringVar(&f.redisPrefix, "redis-prefix", "floodgate:", "with --config and --redis: prefix of every Redis key (serve's default, so both share counts)")
	fl.DurationVar(&f.maxDelay, "max-delay", proxy.DefaultMaxDelay, "with --config: the longest a leaky_bucket limit holds a request; longer waits are refused with 429")
	fl.StringVar(&f.upstream, "upstream", "", "the backend's base URL (required), e.g. http://127.0.0.1:3000")
	fl.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "listen address")
	fl.StringVar(&f.limit, "limit", "", "the limit (required, unless --concurrency alone is to protect the upstream): N/s, N/m, N/h, N/d or N/<duration> such as 500/5m")
	fl.StringVar(&f.algorithm, "algorithm", string(floodgate.TokenBucket), "token_bucket, leaky_bucket (shapes: holds requests), fixed_window, sliding_log or sliding_window")
	fl.Int64Var(&f.burst, "burst", 0, "bucket capacity (default: the rate)")
	fl.StringVar(&f.by, "by", "ip", "what a client is: ip, header:NAME, path, host or method; several joined with + (ip+path)")
	fl.Var(&f.missing, "missing", "what a request without a value for --by (no such header) gets: deny (400 naming the limit), pass (not limited) or shared (all such requests share one count)")
	fl.StringSliceVar(&f.trusted, "trusted-proxies", nil, "CIDRs whose X-Forwarded-For / Forwarded headers are believed")
	fl.StringVar(&f.redis, "redis", "", "count in Redis (host:port or redis://[user:password@]host:port[/db], rediss:// for TLS, unix:///path/redis.sock for a Unix socket; or cluster seeds or Sentinels comma-separated) to share the limit between proxies")
	registerRedisAuth(fl, &f.redisAuth)
	fl.StringVar(&f.failureMode, "failure-mode", string(failover.FailOpen), "with --redis: fail_open, fail_closed or fail_local when Redis cannot answer")
	fl.DurationVar(&f.storeTimeout, "store-timeout", failover.DefaultTimeout, "with --redis: the longest a decision waits")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.Var(&f.logLevel, "log-level", "the least severe level logged: debug, info, warn or error")
	fl.IntVar(&f.maxKeys, "max-keys", defaultMaxKeys, "the most keys held in memory; past it the least recently used key is forgotten (0: unbounded)")
	registerFleet(fl, &f.fleet)
	f.reload.register(fl)
	f.gcFloor.register(fl)
	f.listen.register(fl, true)
	f.observe.register(fl)
	f.conc.register(fl)
	fl.StringVar(&f.adminAddr, "admin", "",
		"listen address of an admin listener serving /metrics, /healthz, the admin JSON routes (/admin/top, /admin/near-limit, /admin/events, /admin/stats, /admin/status) and the live view /admin/ui/ (default: none)")
	fl.StringVar(&f.adminToken, "admin-token", "", "bearer token of the admin listener's /admin routes (empty: they are off; /metrics stays open)")
	return cmd
}

// oneLineFlags describe a single limit; --config replaces them all.
var oneLineFlags = []string{"limit", "algorithm", "burst", "by", "missing", "trusted-proxies"}

// missingFlag is --missing: httplimit's Missing by name. Its zero value
// is httplimit.Deny, the middleware's default.
type missingFlag httplimit.Missing

// missingNames are --missing's values, in httplimit.Missing's order.
var missingNames = []string{httplimit.Deny: "deny", httplimit.Pass: "pass", httplimit.Shared: "shared"}

func (m *missingFlag) String() string { return missingNames[*m] }
func (m *missingFlag) Type() string   { return "deny|pass|shared" }

func (m *missingFlag) Set(s string) error {
	i := slices.Index(missingNames, s)
	if i < 0 {
		return fmt.Errorf("%q: want deny, pass or shared", s)
	}
	*m = missingFlag(i)
	return nil
}

func parseUpstream(s string) (*url.URL, error) {
	target, err := url.Parse(s)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return nil, fmt.Errorf("--upstream %q: want an http:// or https:// URL with a host", s)
	}
	return target, nil
}

// parseRate reads "100/m", "10/s", "500/5m".
func parseRate(s string) (int64, time.Duration, error) {
	n, per, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("--limit %q: want N/unit, such as 100/m", s)
	}
	rate, err := strconv.ParseInt(n, 10, 64)
	if err != nil || rate <= 0 {
		return 0, 0, fmt.Errorf("--limit %q: %q is not a positive whole number", s, n)
	}
	units := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
	if d, ok := units[per]; ok {
		return rate, d, nil
	}
	d, err := time.ParseDuration(per)
	if err != nil || d <= 0 {
		return 0, 0, fmt.Errorf("--limit %q: %q is neither s, m, h, d nor a positive duration", s, per)
	}
	return rate, d, nil
}

// parseBy turns --by into a key function.
func parseBy(by string, trusted []string) (httplimit.KeyFunc, error) {
	var prefixes []netip.Prefix
	for _, t := range trusted {
		p, err := netip.ParsePrefix(strings.TrimSpace(t))
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxies %q: %w", t, err)
		}
		prefixes = append(prefixes, p)
	}
	var parts []httplimit.KeyFunc
	for _, part := range strings.Split(by, "+") {
		kind, arg, _ := strings.Cut(strings.TrimSpace(part), ":")
		switch {
		case kind == "ip" && arg == "":
			parts = append(parts, httplimit.ByIP(httplimit.IPOptions{TrustedProxies: prefixes}))
		case kind == "header" && arg != "":
			parts = append(parts, httplimit.ByHeader(arg))
		case kind == "path" && arg == "":
			parts = append(parts, httplimit.ByPath())
		case kind == "host" && arg == "":
			parts = append(parts, httplimit.ByHost())
		case kind == "method" && arg == "":
			parts = append(parts, httplimit.ByMethod())
		default:
			return nil, fmt.Errorf("--by %q: %q is not ip, header:NAME, path, host or method", by, part)
		}
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return httplimit.Combine(parts...), nil
}

// oneLineStores is where the one-line proxy counts: memory, or Redis under
// keys of its own behind --failure-mode, exact, in a fleet of --nodes (at
// least 1). Its failure mode matters only with Redis (--redis or
// --redis-sentinel), so only then is it read, after --max-keys (which Open
// checks first).
func oneLineStores(f proxyFlags) (assemble.Config, error) {
	var mode failover.Mode
	if f.maxKeys >= 0 && (f.redis != "" || f.redisAuth.Sentinel != "") {
		var err error
		if mode, err = failover.ParseMode(f.failureMode); err != nil {
			return assemble.Config{}, fmt.Errorf("--failure-mode: %w", err)
		}
	}
	cfg := f.stores(mode)
	cfg.RedisPrefix = "floodgate:proxy:"
	cfg.Fleet = assemble.FleetConfig{Strategy: policy.StrategyExact, Nodes: max(1, f.fleet.Nodes)}
	return cfg, nil
}

func runProxy(ctx context.Context, f proxyFlags, stderr io.Writer) error {
	log, err := newLogger(stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	defer f.gcFloor.start(log)()
	if f.upstream == "" || (f.limit == "" && !f.conc.on()) {
		return errors.New("--upstream and --limit (or --config, or --concurrency alone) are required")
	}
	if f.limit == "" && len(f.conflicts) > 0 {
		return fmt.Errorf("%s: needs --limit (with --concurrency alone the proxy has no rate limit)", strings.Join(f.conflicts, ", "))
	}
	if len(f.fleetGiven) > 0 {
		return fmt.Errorf("%s: the cluster strategies apply to a policy's limits: give --config", strings.Join(f.fleetGiven, ", "))
	}
	target, err := parseUpstream(f.upstream)
	if err != nil {
		return err
	}
	var rate int64
	var period time.Duration
	if f.limit != "" {
		if rate, period, err = parseRate(f.limit); err != nil {
			return err
		}
	}
	key, err := parseBy(f.by, f.trusted)
	if err != nil {
		return err
	}
	cfg, err := oneLineStores(f)
	if err != nil {
		return err
	}
	obs, st, closeAll, err := openObserved(ctx, f.observe, cfg, nil, log)
	if err != nil {
		return err
	}
	defer closeAll()
	limitText, mw := "none", func(h http.Handler) http.Handler { return h } // --concurrency alone: no rate limit
	if f.limit != "" {
		limit := floodgate.Limit{Algorithm: floodgate.Algorithm(f.algorithm), Rate: rate, Period: period, Burst: f.burst}
		if mw, err = httplimit.New(st.Default(), httplimit.Options{Rules: []httplimit.Rule{{Name: "proxy", Limit: limit, Key: key}},
			Missing: httplimit.Missing(f.missing), Name: "proxy", Observer: obs.Observer}); err != nil {
			return fmt.Errorf("--limit/--algorithm/--burst: %w", err)
		}
		limitText = limit.String()
	}
	prot, err := f.conc.protection(obs, "proxy")
	if err != nil {
		return err
	}
	rp, err := proxy.NewProtected(target, proxy.Forwarding{UpstreamTimeout: f.listen.upstreamTimeout, Logger: log}, prot)
	if err != nil {
		return err
	}
	if err := obs.Registry.Register(rp.Collector()); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return fmt.Errorf("--http %s: %w", f.httpAddr, err)
	}
	admin, err := f.admin(obs, "", st, nil)
	if err != nil {
		ln.Close()
		return err
	}
	watchBreaker(ctx, obs, st)
	log.Info("floodgate proxy serving", "http", ln.Addr().String(), "admin", admin.addr(), "upstream", target.String(), "limit", limitText, "by", f.by, "missing", f.missing.String(),
		"concurrency", concurrencyString(prot.Concurrency))
	return serveUntilDone(ctx, f.listen, obs.WrapHTTP(mw(rp), "floodgate proxy"), ln, admin, log)
}

// runRoutedProxy is `floodgate proxy --config`: the routes and descriptors
// of a policy, decided by serve's engine over serve's stores.
func runRoutedProxy(ctx context.Context, f proxyFlags, stderr io.Writer) error {
	log, err := newLogger(stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	defer f.gcFloor.start(log)()
	if len(f.conflicts) > 0 {
		return fmt.Errorf("--config replaces %s: give one or the other", strings.Join(f.conflicts, ", "))
	}
	if f.upstream == "" {
		return errors.New("--upstream is required")
	}
	target, err := parseUpstream(f.upstream)
	if err != nil {
		return err
	}
	defaultMode, err := failover.ParseMode(f.failureMode)
	if err != nil {
		return fmt.Errorf("--failure-mode: %w", err)
	}
	policies, err := loadPolicies(f.config, f.reload)
	if err != nil {
		return err
	}
	if err := requireRoutes(f.config, f.reload)(policies); err != nil {
		return err
	}
	obs, st, closeAll, err := openObserved(ctx, f.observe, f.stores(defaultMode), policies, log)
	if err != nil {
		return err
	}
	defer closeAll()
	eng := engine.New(policies, st).Observe(observe.SurfaceProxy, obs.Observer)
	if f.maxDelay <= 0 {
		return fmt.Errorf("--max-delay %s: want a positive duration", f.maxDelay)
	}
	prot, err := f.conc.protection(obs, "")
	if err != nil {
		return err
	}
	handler, err := proxy.New(proxy.Options{Upstream: target, Engine: eng, Logger: log, MaxDelay: f.maxDelay, UpstreamTimeout: f.listen.upstreamTimeout,
		Protection: prot})
	if err != nil {
		return err
	}
	if err := obs.Registry.Register(handler.Collector()); err != nil {
		return err
	}
	routes := requireRoutes(f.config, f.reload)
	reload := &reloader{path: f.config, flags: f.reload, holder: eng, log: log, after: time.After, counted: obs.ConfigReload,
		check: func(set *policy.Set) error { return errors.Join(routes(set), st.Check(set)) }}
	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return fmt.Errorf("--http %s: %w", f.httpAddr, err)
	}
	admin, err := f.admin(obs, f.config, st, eng.Policies)
	if err != nil {
		ln.Close()
		return err
	}
	if err := watchPolicies(ctx, f.config, reload, log); err != nil {
		ln.Close()
		closeAdmin(admin)
		return err
	}
	watchBreaker(ctx, obs, st)
	log.Info("floodgate proxy serving", "http", ln.Addr().String(), "admin", admin.addr(), "upstream", target.String(),
		"store", st.Name(), "policy", f.config, "domains", policies.Domains(), "routes", len(policies.Routes()),
		"concurrency", concurrencyString(prot.Concurrency))
	return serveUntilDone(ctx, f.listen, obs.WrapHTTP(handler, "floodgate proxy"), ln, admin, log)
}

// adminListener is the proxy's --admin listener and what it serves.
type adminListener struct {
	ln      net.Listener
	handler http.Handler
}

// admin binds --admin, when given, to the observers' admin handler.
// policies is nil for the one-line proxy, which has none.
func (f proxyFlags) admin(obs *observers.Set, config string, st *assemble.Stores, policies func() *policy.Set) (*adminListener, error) {
	if f.adminAddr == "" {
		if f.adminToken != "" {
			return nil, errors.New("--admin-token needs --admin: the proxy serves its admin routes on their own listener")
		}
		return nil, nil
	}
	ln, err := net.Listen("tcp", f.adminAddr)
	if err != nil {
		return nil, fmt.Errorf("--admin %s: %w", f.adminAddr, err)
	}
	srv := statusOf(observe.SurfaceProxy, config, st)
	srv.Policies = policies
	return &adminListener{ln: ln, handler: obs.AdminHandler(f.adminToken, srv)}, nil
}

// addr is where the admin listener listens, for the start's log line
// (--admin 127.0.0.1:0 picks a port); "" without --admin.
func (a *adminListener) addr() string {
	if a == nil {
		return ""
	}
	return a.ln.Addr().String()
}

func closeAdmin(a *adminListener) {
	if a != nil {
		a.ln.Close()
	}
}

// serveUntilDone serves h on ln with the listener flags' bounds until ctx
// is done, then drains it as serve drains its listeners (listen.Drain)
// and returns nil. The proxy has no readiness endpoint: every path is the
// upstream's. Its drain is the grace period, with Connection: close on
// every response, then the close.
func serveUntilDone(ctx context.Context, lf listenFlags, h http.Handler, ln net.Listener, admin *adminListener, log *slog.Logger) error {
	opts, err := lf.options(log)
	if err != nil {
		ln.Close()
		closeAdmin(admin)
		return err
	}
	d := listen.NewDrain(*opts, log)
	servers := []listen.Server{listen.HTTP(d.HTTPServer(h), ln)}
	if admin != nil {
		servers = append(servers, listen.HTTP(d.AdminHTTPServer(admin.handler), admin.ln))
	}
	err = d.Serve(ctx, servers...)
	log.Info("floodgate proxy stopped")
	return err
}
