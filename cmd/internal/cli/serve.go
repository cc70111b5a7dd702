package cli

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/floodgate-io/floodgate/cmd/internal/assemble"
	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/cmd/internal/server"
	"github.com/floodgate-io/floodgate/cmd/internal/watch"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/observe"
)

//go:embed default_policy.yaml
var defaultPolicy []byte

// serveFlags are serve's settings; each flag has an environment variable.
type serveFlags struct {
	storeFlags
	config      string
	httpAddr    string
	grpcAddr    string
	adminToken  string
	headers     bool
	atomic      bool
	countDenied bool
	modes       server.Modes
	gcFloor     gcFloorFlag
	envoyHdrs   envoyHeaderFlags
	logFormat   string
	logLevel    logLevel
	reload      reloadFlags
	listen      listenFlags
	compat      compatFlags
	observe     observeFlags
}

// storeFlags are the settings of serve and proxy that say where they
// count and how the fleet shares limits: assemble's Config as flags.
type storeFlags struct {
	redis        string
	redisAuth    assemble.RedisAuth
	redisPrefix  string
	failureMode  string
	storeTimeout time.Duration
	maxKeys      int
	fleet        assemble.FleetConfig
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Answer rate-limit decisions over HTTP and Envoy's rate limit gRPC protocol",
		Long: "Serves POST /v1/allow, Envoy's POST /json, /healthz, /readyz, /metrics and /admin over HTTP,\n" +
			"and envoy.service.ratelimit.v3.RateLimitService over gRPC. Without --config it enforces a\n" +
			"built-in example policy; without --redis it counts in memory.\n\n" +
			"Every flag can also be set in the environment as FLOODGATE_ and its name in capitals with\n" +
			"underscores: --store-timeout is FLOODGATE_STORE_TIMEOUT (flags win). Limits, timeouts and the\n" +
			"drain on SIGTERM are in docs/operations.md.\n\n" +
			"Several nodes share their limits by a strategy (--strategy, or strategy: per limit in the policy):\n" +
			"exact counts every request in Redis; local enforces limit/N per node; leased, synced and sampled\n" +
			"keep shared state in Redis and decide in memory; gossip needs no Redis, only --cluster-bind.",
		Example: "  floodgate serve                                                      # built-in policy, in memory\n" +
			"  floodgate serve --config examples/policies/ --redis 127.0.0.1:6379   # your policies, one limit for the fleet\n" +
			"  floodgate serve --redis 127.0.0.1:6379 --strategy leased --nodes 3   # leases of quota from Redis\n" +
			"  floodgate serve --strategy gossip --cluster-bind 127.0.0.1:7946 --cluster-join 10.0.0.2:7946\n" +
			"  FLOODGATE_REDIS=rediss://app:secret@redis:6380/0 floodgate serve --http 0.0.0.0:8080 --grpc 0.0.0.0:8081",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.compat.apply(cmd.Flags(), os.Environ()); err != nil {
				return err
			}
			if err := applyEnv(cmd); err != nil {
				return err
			}
			return serve(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "policy file or directory (default: the built-in example policy)")
	fl.StringVar(&f.redis, "redis", "", "Redis address (host:port, redis://[user:password@]host:port[/db], rediss:// for TLS, unix:///path/redis.sock[?db=N] for a Unix socket), or several seeds of a Redis Cluster or Sentinels, comma-separated (default: count in memory)")
	registerRedisAuth(fl, &f.redisAuth)
	fl.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "HTTP listen address")
	fl.StringVar(&f.grpcAddr, "grpc", "127.0.0.1:8081", "gRPC listen address")
	fl.StringVar(&f.adminToken, "admin-token", "", "bearer token for /admin (empty: the admin API is off)")
	fl.StringVar(&f.failureMode, "failure-mode", string(failover.FailOpen), "what limits without their own failure_mode do when Redis cannot answer: fail_open, fail_closed or fail_local")
	fl.DurationVar(&f.storeTimeout, "store-timeout", failover.DefaultTimeout, "the longest a decision waits for Redis; past it the limit's failure_mode decides (see docs/failover.md)")
	fl.StringVar(&f.redisPrefix, "redis-prefix", "floodgate:", "prefix of every Redis key")
	fl.BoolVar(&f.headers, "headers", true, "add RateLimit-Policy and RateLimit to Envoy's response_headers_to_add")
	fl.BoolVar(&f.atomic, "atomic", false, "decide all descriptors of an Envoy request all or nothing (default: each on its own, as Envoy's service does)")
	fl.BoolVar(&f.countDenied, "count-denied-hits", false, "on the Envoy surfaces (gRPC, /json), count the hits a limit denies too, as Envoy's service does: once a request is denied, a smaller one later in the window is denied too (memory and Redis stores)")
	f.envoyHdrs.register(fl)
	f.observe.register(fl)
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.Var(&f.logLevel, "log-level", "the least severe level logged: debug, info, warn or error")
	fl.IntVar(&f.maxKeys, "max-keys", defaultMaxKeys, "the most keys held in memory by the memory store and the strategies' local state; past it the least recently used key is forgotten (0: unbounded)")
	registerFleet(fl, &f.fleet)
	f.reload.register(fl)
	fl.BoolVar(&f.modes.Shadow, "shadow-mode", false,
		"answer every request allowed, as envoyproxy/ratelimit's SHADOW_MODE does: limits count and report as usual, "+
			"Envoy's overall code and /v1/allow's answer are never over the limit")
	fl.BoolVar(&f.modes.Quota, "quota-mode", false,
		"treat every descriptor of Envoy's requests as a quota, as envoyproxy/ratelimit's QUOTA_MODE does: "+
			"a request is over the limit only when all its descriptors (but unlimited ones) are")
	f.gcFloor.register(fl)
	f.listen.register(fl, false)
	f.compat.register(fl)
	return cmd
}

// defaultMaxKeys bounds the in-memory state of serve and proxy unless
// --max-keys says otherwise.
const defaultMaxKeys = 1_000_000

// applyEnv sets every flag not given on the command line from its
// FLOODGATE_ variable, and reports a bad value with the variable's name.
func applyEnv(cmd *cobra.Command) error {
	var errs []error
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		name := "FLOODGATE_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		v, ok := os.LookupEnv(name)
		if !ok || fl.Changed {
			return
		}
		if err := fl.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
		}
	})
	return errors.Join(errs...)
}

func newLogger(w io.Writer, format string, level logLevel) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: slog.Level(level)}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

func serve(ctx context.Context, f serveFlags, stderr io.Writer) error {
	log, err := newLogger(stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	f.compat.report(log)
	defer f.gcFloor.start(log)()
	defaultMode, err := failover.ParseMode(f.failureMode)
	if err != nil {
		return fmt.Errorf("--failure-mode: %w", err)
	}
	envoyHeaders, err := f.envoyHdrs.options()
	if err != nil {
		return err
	}
	listenOpts, err := f.listen.options(log)
	if err != nil {
		return err
	}
	policies, err := loadPolicies(f.config, f.reload)
	if err != nil {
		return err
	}
	obs, st, closeAll, err := openObserved(ctx, f.observe, f.stores(defaultMode), policies, log)
	if err != nil {
		return err
	}
	defer closeAll()

	eng := engine.New(policies, st)
	reload := &reloader{path: f.config, flags: f.reload, holder: eng, check: st.Check,
		counted: obs.ConfigReload, log: log, after: time.After}
	srv := server.New(server.Options{
		Engine:          eng,
		Limiter:         st.Default(), // requests with an explicit limit follow --strategy too
		Observers:       obs,
		Status:          statusOf(observe.SurfaceServe, f.config, st),
		Logger:          log,
		Ready:           st.Ready,
		AdminToken:      f.adminToken,
		Reload:          reload.explicit,
		Reset:           st.Reset,
		Headers:         f.headers,
		EnvoyHeaders:    envoyHeaders,
		AtomicRLS:       f.atomic,
		CountDeniedHits: f.countDenied,
		Modes:           f.modes,
		Listen:          listenOpts,
	})
	lns, err := f.listen.bind(f.httpAddr, f.grpcAddr)
	if err != nil {
		return err
	}
	if err := watchPolicies(ctx, f.config, reload, log); err != nil {
		closeListeners(lns)
		return err
	}
	watchBreaker(ctx, obs, st)
	log.Info("floodgate serving", append(listenerAddrs(lns), "tls", listenOpts.TLS != nil,
		"store", st.Name(), "strategy", string(f.fleet.Strategy), "nodes", st.Count(),
		"policy", policySource(f.config), "domains", policies.Domains())...)
	err = srv.ServeListeners(ctx, lns)
	log.Info("floodgate stopped")
	return err
}

func policySource(path string) string {
	if path == "" {
		return "built-in example"
	}
	return path
}

// loadPolicies reads the policy at path, or the built-in example policy
// when path is "". A path that holds no policy is an error unless the
// flags allow an empty one.
func loadPolicies(path string, flags reloadFlags) (*policy.Set, error) {
	if path == "" {
		p, err := config.Parse("built-in example policy", defaultPolicy)
		if err != nil {
			return nil, err
		}
		return policy.NewSet(p)
	}
	return flags.parse(config.ReadFiles(path))
}

// watchPolicies reloads when the policy's files change (a watched reload)
// and on SIGHUP (an explicit one).
func watchPolicies(ctx context.Context, path string, reload *reloader, log *slog.Logger) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: reloading the config")
				reload.explicit()
			}
		}
	}()
	if path == "" {
		return nil
	}
	return watch.Watch(ctx, []string{path}, func() { reload.watched(ctx) })
}

// stores is assemble's Config from the flags and the parsed
// --failure-mode: the Redis addresses are --redis split at its commas.
func (f storeFlags) stores(defaultMode failover.Mode) assemble.Config {
	return assemble.Config{Redis: splitAddrs(f.redis), RedisAuth: f.redisAuth, RedisPrefix: f.redisPrefix, StoreTimeout: f.storeTimeout,
		FailureMode: defaultMode, MaxKeys: f.maxKeys, Fleet: f.fleet}
}

// splitAddrs reads a comma-separated --redis ("": none, count in memory).
func splitAddrs(redis string) []string {
	if redis == "" {
		return nil
	}
	return strings.Split(redis, ",")
}
