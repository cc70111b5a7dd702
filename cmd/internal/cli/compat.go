package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	neturl "net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// compatEnvoyRatelimit is the --compat value under which serve reads
// envoyproxy/ratelimit's environment (docs/migrating-from-envoy-ratelimit.md).
const compatEnvoyRatelimit = "envoy-ratelimit"

// errCompat marks a compatibility variable whose value Floodgate cannot
// honour: serve refuses to start rather than run differently.
var errCompat = errors.New("cannot be honoured")

// compatFlags is the --compat switch and what it did, for the start-up log.
type compatFlags struct {
	mode  string
	notes []compatNote
}

// compatNote is a line of the start-up log: a variable mapped to a flag,
// overridden by one, or ignored, and why.
type compatNote struct {
	variable, outcome string
}

func (c *compatFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&c.mode, "compat", "", "read another service's environment variables: envoy-ratelimit "+
		"(envoyproxy/ratelimit's REDIS_URL, RUNTIME_ROOT, PORT, …; flags and FLOODGATE_ variables win)")
}

// apply sets the flags from the compatibility variables in environ (as
// os.Environ), where neither the flag nor its FLOODGATE_ variable is
// given: flags > FLOODGATE_ variables > compatibility variables. It runs
// before applyEnv, which then sets the FLOODGATE_ variables' flags.
func (c *compatFlags) apply(fs *pflag.FlagSet, environ []string) error {
	env := envMap(environ)
	mode := c.mode
	if !fs.Changed("compat") {
		mode = env["FLOODGATE_COMPAT"]
	}
	switch mode {
	case "":
		return nil
	case compatEnvoyRatelimit:
	default:
		return fmt.Errorf("--compat %q: want %s", mode, compatEnvoyRatelimit)
	}
	c.mode = mode
	given := func(flag string) bool { _, ok := env[flagEnvName(flag)]; return fs.Changed(flag) || ok }
	plan, err := envoyRatelimit(env, given)
	if err != nil {
		return err
	}
	for _, s := range plan.sets {
		fl := fs.Lookup(s.flag)
		if fl == nil {
			return fmt.Errorf("%s: serve has no --%s", s.variable, s.flag) // a defect of the table
		}
		if given(s.flag) {
			c.notes = append(c.notes, compatNote{s.variable, "overridden by --" + s.flag + " or " + flagEnvName(s.flag)})
			continue
		}
		if err := fl.Value.Set(s.value); err != nil {
			return fmt.Errorf("%s (as --%s %s): %w", s.variable, s.flag, s.value, err)
		}
		c.notes = append(c.notes, compatNote{s.variable, "mapped to --" + s.flag})
	}
	c.notes = append(c.notes, plan.notes...)
	return nil
}

// report logs what the compatibility mode did with each variable.
func (c *compatFlags) report(log *slog.Logger) {
	for _, n := range c.notes {
		if strings.HasPrefix(n.outcome, "ignored") {
			log.Warn("compat "+c.mode+": "+n.outcome, "variable", n.variable)
			continue
		}
		log.Info("compat "+c.mode+": "+n.outcome, "variable", n.variable)
	}
}

// flagEnvName is the FLOODGATE_ variable of a flag (see applyEnv).
func flagEnvName(flag string) string {
	return "FLOODGATE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func envMap(environ []string) map[string]string {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// compatPlan is what envoyproxy/ratelimit's variables say, in flags.
type compatPlan struct {
	sets  []flagSetting
	notes []compatNote // ignored variables, and remarks on mapped ones
}

type flagSetting struct {
	variable, flag, value string
}

// envoyEnv reads envoyproxy/ratelimit's variables with its defaults and
// its parsing (strconv.ParseBool for booleans), collecting the errors.
type envoyEnv struct {
	env  map[string]string
	errs []error
	plan compatPlan
}

func (e *envoyEnv) str(name, def string) string {
	if v, ok := e.env[name]; ok {
		return v
	}
	return def
}

func (e *envoyEnv) boolean(name string, def bool) bool {
	v, ok := e.env[name]
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: want true or false", name, v))
	}
	return b
}

func (e *envoyEnv) set(variable, flag, value string) {
	e.plan.sets = append(e.plan.sets, flagSetting{variable, flag, value})
}

// refuse reports a variable whose value Floodgate cannot honour.
func (e *envoyEnv) refuse(variable, value, why string) {
	e.errs = append(e.errs, fmt.Errorf("%s=%s %w: %s", variable, value, errCompat, why))
}

// ignore notes the variables of names that are set: accepted, not used.
func (e *envoyEnv) ignore(why string, names ...string) {
	for _, n := range names {
		if _, ok := e.env[n]; ok {
			e.plan.notes = append(e.plan.notes, compatNote{n, "ignored (" + why + ")"})
		}
	}
}

// note reports how a variable's value was read, beside its mapping.
func (e *envoyEnv) note(variable, what string) {
	e.plan.notes = append(e.plan.notes, compatNote{variable, what})
}

// ignorePrefix notes every set variable whose name starts with prefix.
func (e *envoyEnv) ignorePrefix(why, prefix string) {
	var names []string
	for k := range e.env {
		if strings.HasPrefix(k, prefix) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	e.ignore(why, names...)
}

// envoyRatelimit maps envoyproxy/ratelimit's environment (its
// src/settings/settings.go) onto serve's flags: each variable is mapped,
// ignored with a reason, or refused when Floodgate cannot honour its
// value. given tells which flags the operator set (flag or FLOODGATE_
// variable); the Redis variables are not read when --redis is given.
func envoyRatelimit(env map[string]string, given func(flag string) bool) (compatPlan, error) {
	e := &envoyEnv{env: env}
	e.listeners()
	e.configSource()
	e.decisions()
	if given("redis") {
		e.ignorePrefix("--redis or FLOODGATE_REDIS is given", "REDIS_")
	} else {
		e.redis()
	}
	e.observability()
	return e.plan, errors.Join(e.errs...)
}

func (e *envoyEnv) listeners() {
	e.set("HOST, PORT", "http", e.hostPort("HOST", "PORT", "8080"))
	e.set("GRPC_HOST, GRPC_PORT", "grpc", e.hostPort("GRPC_HOST", "GRPC_PORT", "8081"))
	if v := e.str("GRPC_UDS", ""); v != "" {
		e.refuse("GRPC_UDS", v, "Floodgate's gRPC listens on TCP only (GRPC_HOST, GRPC_PORT)")
	}
	e.grpcTLS()
	e.ignore("Floodgate closes idle connections after --idle-timeout and does not age busy ones", "GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE")
	// Its debug listener (pprof, stats) is always on; Floodgate's admin
	// listener is asked for: only when the variables are given.
	_, host := e.env["DEBUG_HOST"]
	_, port := e.env["DEBUG_PORT"]
	if host || port {
		e.set("DEBUG_HOST, DEBUG_PORT", "admin", e.hostPort("DEBUG_HOST", "DEBUG_PORT", "6070"))
	}
}

// grpcTLS maps the gRPC listener's TLS. Floodgate's --tls-* serve every
// listener: HTTP too, where envoyproxy/ratelimit's stays plaintext.
func (e *envoyEnv) grpcTLS() {
	if !e.boolean("GRPC_SERVER_USE_TLS", false) {
		e.ignore("used only with GRPC_SERVER_USE_TLS", "GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY", "GRPC_CLIENT_TLS_CACERT", "GRPC_CLIENT_TLS_SAN")
		return
	}
	cert, key := e.str("GRPC_SERVER_TLS_CERT", ""), e.str("GRPC_SERVER_TLS_KEY", "")
	if cert == "" || key == "" {
		e.refuse("GRPC_SERVER_USE_TLS", "true", "it needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY")
		return
	}
	e.set("GRPC_SERVER_TLS_CERT", "tls-cert", cert)
	e.set("GRPC_SERVER_TLS_KEY", "tls-key", key)
	if ca := e.str("GRPC_CLIENT_TLS_CACERT", ""); ca != "" {
		e.set("GRPC_CLIENT_TLS_CACERT", "tls-client-ca", ca)
	}
	if san := e.str("GRPC_CLIENT_TLS_SAN", ""); san != "" {
		// accepting any client of the CA would let in clients it refuses
		e.refuse("GRPC_CLIENT_TLS_SAN", san, "Floodgate accepts every client certificate its CA signed; it does not check a SAN")
	}
}

// hostPort joins a host and a port variable with envoyproxy/ratelimit's
// defaults (every interface).
func (e *envoyEnv) hostPort(hostVar, portVar, defPort string) string {
	port := e.str(portVar, defPort)
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: want a port number", portVar, port))
	}
	return net.JoinHostPort(e.str(hostVar, "0.0.0.0"), port)
}

func (e *envoyEnv) configSource() {
	if v := e.str("CONFIG_TYPE", "FILE"); !strings.EqualFold(v, "FILE") {
		e.refuse("CONFIG_TYPE", v, "Floodgate reads its configuration from files only, not from an xDS server")
	}
	e.ignorePrefix("used only with CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_")
	e.ignorePrefix("used only with CONFIG_TYPE=GRPC_XDS_SOTW", "XDS_CLIENT_")
	dir := filepath.Join(e.str("RUNTIME_ROOT", "/srv/runtime_data/current"), e.str("RUNTIME_SUBDIRECTORY", ""), e.str("RUNTIME_APPDIRECTORY", "config"))
	e.set("RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, RUNTIME_APPDIRECTORY", "config", dir)
	e.boolean("RUNTIME_WATCH_ROOT", true) // read for its errors: either way Floodgate watches both
	e.ignore("Floodgate reloads both when the files in "+dir+" change and when a symbolic link on the way to them is swapped "+
		"(RUNTIME_ROOT's), whatever its value", "RUNTIME_WATCH_ROOT")
	if !e.boolean("RUNTIME_IGNOREDOTFILES", false) {
		e.ignore("Floodgate never loads dot files, and reads only *.yaml and *.yml", "RUNTIME_IGNOREDOTFILES")
	}
	if e.boolean("MERGE_DOMAIN_CONFIG", false) {
		e.set("MERGE_DOMAIN_CONFIG", "merge-domains", "true")
	}
	if e.boolean("FORCE_START_WITHOUT_INITIAL_CONFIG", false) {
		e.set("FORCE_START_WITHOUT_INITIAL_CONFIG", "allow-empty-config", "true")
	}
	e.ignore("Floodgate does not start without a policy unless --allow-empty-config", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED")
}

// decisions are the variables that change what is allowed: those
// Floodgate cannot honour are refused.
func (e *envoyEnv) decisions() {
	if e.boolean("SHADOW_MODE", false) {
		e.set("SHADOW_MODE", "shadow-mode", "true")
	}
	if e.boolean("QUOTA_MODE", false) {
		e.set("QUOTA_MODE", "quota-mode", "true")
	}
	// envoyproxy/ratelimit counts every hit, denied or not, unless told to
	// stop counting once a request is over the limit: then a denied request
	// counts against none of its descriptors, which --atomic does.
	if e.boolean("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", false) {
		e.set("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "atomic", "true")
	} else {
		e.set("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "count-denied-hits", "true")
	}
	// Its answers carry its own headers or none: never Floodgate's.
	e.set("LIMIT_RESPONSE_HEADERS_ENABLED", "headers", "false")
	if e.boolean("LIMIT_RESPONSE_HEADERS_ENABLED", false) {
		e.set("LIMIT_RESPONSE_HEADERS_ENABLED", "envoy-limit-headers", "true")
		for _, h := range []struct{ variable, flag string }{
			{"LIMIT_LIMIT_HEADER", "envoy-limit-header"}, {"LIMIT_REMAINING_HEADER", "envoy-remaining-header"}, {"LIMIT_RESET_HEADER", "envoy-reset-header"},
		} {
			if v, ok := e.env[h.variable]; ok {
				e.set(h.variable, h.flag, v)
			}
		}
	} else {
		e.ignore("used only with LIMIT_RESPONSE_HEADERS_ENABLED", "LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER")
	}
	e.ignore("Floodgate asks Redis for every decision; the answers are the same, without the local cache of keys over their limit",
		"LOCAL_CACHE_SIZE_IN_BYTES")
	if v, ok := e.env["NEAR_LIMIT_RATIO"]; ok {
		e.set("NEAR_LIMIT_RATIO", "near-limit-ratio", v)
	}
	e.ignore("Floodgate's keys expire when their window ends; it needs no jitter", "EXPIRATION_JITTER_MAX_SECONDS")
	e.ignore("Floodgate does not add the request's descriptors to the response's dynamic metadata", "RESPONSE_DYNAMIC_METADATA")
}

func (e *envoyEnv) redis() {
	if v := e.str("BACKEND_TYPE", "redis"); v != "redis" {
		e.refuse("BACKEND_TYPE", v, "Floodgate counts in Redis or in memory; it has no memcached store")
	}
	e.ignorePrefix("BACKEND_TYPE is redis", "MEMCACHE_")
	url := e.str("REDIS_URL", "/var/run/nutcracker/ratelimit.sock")
	switch typ := strings.ToLower(e.str("REDIS_TYPE", "single")); typ {
	case "single":
		if strings.Contains(url, ",") {
			e.refuse("REDIS_URL", url, "REDIS_TYPE=single takes one address")
		}
		if url, ok := e.redisSocket(url); ok {
			e.set("REDIS_URL, REDIS_SOCKET_TYPE", "redis", url)
		}
	case "cluster":
		e.set("REDIS_URL", "redis", url)
	case "sentinel":
		master, sentinels, ok := strings.Cut(url, ",")
		if !ok || master == "" || sentinels == "" {
			e.refuse("REDIS_URL", url, "REDIS_TYPE=sentinel wants the master set's name and the Sentinels: mymaster,host:26379,…")
			return
		}
		e.set("REDIS_URL", "redis", sentinels)
		e.set("REDIS_URL", "redis-sentinel-master", master)
		e.auth("REDIS_SENTINEL_AUTH", "redis-sentinel-username", "redis-sentinel-password")
	default:
		e.refuse("REDIS_TYPE", typ, "want single, cluster or sentinel")
	}
	if !strings.EqualFold(e.str("REDIS_TYPE", "single"), "sentinel") {
		e.ignore("used only with REDIS_TYPE=sentinel", "REDIS_SENTINEL_AUTH")
	}
	if !strings.EqualFold(e.str("REDIS_TYPE", "single"), "single") {
		e.ignore("a Redis Cluster and Sentinels are reached over TCP, as there", "REDIS_SOCKET_TYPE")
	}
	e.auth("REDIS_AUTH", "redis-username", "redis-password")
	e.redisTLS()
	if v, ok := e.env["CACHE_KEY_PREFIX"]; ok {
		e.set("CACHE_KEY_PREFIX", "redis-prefix", v)
	}
	e.ignore("Floodgate pipelines and batches every caller's requests over one connection per Redis node",
		"REDIS_POOL_SIZE", "REDIS_PIPELINE_WINDOW", "REDIS_PIPELINE_LIMIT", "REDIS_CLUSTER_PIPELINE_PARALLELISM", "REDIS_POOL_ON_EMPTY_BEHAVIOR")
	e.ignore("each decision waits at most --store-timeout, then the limit's failure_mode (--failure-mode) decides", "REDIS_TIMEOUT")
	e.ignore("/readyz fails while Redis is down only for fail_closed limits (--failure-mode)", "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION")
	e.ignore("Floodgate exits at start when Redis does not answer; its supervisor restarts it",
		"REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME")
	e.ignore("per-second limits are counted in the Redis of REDIS_URL with the others", "REDIS_PERSECOND")
	e.ignorePrefix("Floodgate uses one Redis, REDIS_URL, for every limit", "REDIS_PERSECOND_")
}

// redisSocket is --redis for a single Redis at url, reached as
// REDIS_SOCKET_TYPE says (its default: unix): host:port over TCP, or a
// unix:// URL of the socket's path. ok is false when it is refused.
func (e *envoyEnv) redisSocket(url string) (redis string, ok bool) {
	switch socket := e.str("REDIS_SOCKET_TYPE", "unix"); socket {
	case "tcp":
		return url, true
	case "unix":
		if !filepath.IsAbs(url) {
			e.refuse("REDIS_URL", url, "with REDIS_SOCKET_TYPE=unix it is the path of Redis's socket: give it from the root (/var/run/redis.sock)")
			return "", false
		}
		if e.boolean("REDIS_TLS", false) {
			e.refuse("REDIS_TLS", "true", "Floodgate speaks plain Redis over a Unix socket (REDIS_SOCKET_TYPE=unix): the socket never leaves the machine")
			return "", false
		}
		return (&neturl.URL{Scheme: "unix", Path: url}).String(), true
	default:
		e.refuse("REDIS_SOCKET_TYPE", socket, "want tcp or unix")
		return "", false
	}
}

// auth maps a "password" or "user:password" variable onto two flags.
func (e *envoyEnv) auth(variable, userFlag, passwordFlag string) {
	v := e.str(variable, "")
	if v == "" {
		return
	}
	if user, password, ok := strings.Cut(v, ":"); ok {
		e.set(variable, userFlag, user)
		e.set(variable, passwordFlag, password)
		return
	}
	e.set(variable, passwordFlag, v)
}

func (e *envoyEnv) redisTLS() {
	files := []struct{ variable, flag string }{
		{"REDIS_TLS_CACERT", "redis-tls-ca"}, {"REDIS_TLS_CLIENT_CERT", "redis-tls-cert"}, {"REDIS_TLS_CLIENT_KEY", "redis-tls-key"},
	}
	if !e.boolean("REDIS_TLS", false) {
		for _, f := range files {
			e.ignore("used only with REDIS_TLS=true", f.variable)
		}
		e.ignore("used only with REDIS_TLS=true", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION")
		return
	}
	e.set("REDIS_TLS", "redis-tls", "true")
	for _, f := range files {
		if v := e.str(f.variable, ""); v != "" {
			e.set(f.variable, f.flag, v)
		}
	}
	if e.boolean("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false) {
		e.set("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "redis-tls-skip-hostname-verification", "true")
	}
}

// envoyLogLevels are envoyproxy/ratelimit's log levels (logrus's, read
// without regard to case) and Floodgate's nearest: trace is debug,
// fatal and panic are error (Floodgate has no more severe level).
var envoyLogLevels = map[string]string{"trace": "debug", "debug": "debug", "info": "info", "warn": "warn", "warning": "warn",
	"error": "error", "fatal": "error", "panic": "error"}

// logLevel maps LOG_LEVEL when it is set. Unset, Floodgate keeps its info
// (envoyproxy/ratelimit's default is warn, at which it logs its start):
// so the start-up lines, this report among them, are seen.
func (e *envoyEnv) logLevel() {
	v, ok := e.env["LOG_LEVEL"]
	if !ok {
		return
	}
	level, ok := envoyLogLevels[strings.ToLower(v)]
	if !ok {
		e.errs = append(e.errs, fmt.Errorf("LOG_LEVEL=%q: want trace, debug, info, warn, warning, error, fatal or panic", v))
		return
	}
	if !strings.EqualFold(v, level) {
		e.note("LOG_LEVEL", v+" is "+level+" here, Floodgate's nearest level")
	}
	e.set("LOG_LEVEL", "log-level", level)
}

func (e *envoyEnv) observability() {
	if v := strings.ToLower(e.str("LOG_FORMAT", "text")); v == "json" {
		e.set("LOG_FORMAT", "log-format", "json")
	} else {
		e.set("LOG_FORMAT", "log-format", "text") // envoyproxy/ratelimit's rule: anything but json is text
	}
	e.logLevel()
	const metrics = "Floodgate's metrics are Prometheus's, at /metrics on the HTTP listener"
	e.ignore(metrics, "USE_STATSD", "USE_DOG_STATSD", "USE_DOG_STATSD_MOGRIFIERS", "STATSD_HOST", "STATSD_PORT", "EXTRA_TAGS",
		"STATS_FLUSH_INTERVAL", "DISABLE_STATS", "USE_PROMETHEUS", "PROMETHEUS_ADDR", "PROMETHEUS_PATH", "PROMETHEUS_MAPPER_YAML",
		"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS")
	e.ignorePrefix("Floodgate traces when the standard OTEL_* variables ask for it (OTEL_EXPORTER_OTLP_ENDPOINT, which envoyproxy/ratelimit reads too); TRACING_* are its own", "TRACING_")
}
