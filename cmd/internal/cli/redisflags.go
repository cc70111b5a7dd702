package cli

import (
	"github.com/spf13/pflag"

	"github.com/floodgate-io/floodgate/cmd/internal/assemble"
)

// registerRedisAuth adds the flags of Redis's credentials, TLS and
// Sentinel, parsed into a. --redis's URLs can carry the credentials,
// database and TLS too.
func registerRedisAuth(fl *pflag.FlagSet, a *assemble.RedisAuth) {
	fl.StringVar(&a.Username, "redis-username", "", "Redis ACL user (default: none, or the --redis URL's)")
	fl.StringVar(&a.Password, "redis-password", "", "Redis password (AUTH); prefer FLOODGATE_REDIS_PASSWORD to keep it out of the process list")
	fl.StringVar(&a.PasswordFile, "redis-password-file", "", "file holding the Redis password (a mounted secret; one trailing newline dropped), instead of --redis-password or a URL's")
	fl.BoolVar(&a.TLS.Enabled, "redis-tls", false, "reach Redis over TLS (a rediss:// URL does too)")
	fl.StringVar(&a.TLS.CA, "redis-tls-ca", "", "PEM file of the authorities that sign Redis's certificate (default: the system's)")
	fl.StringVar(&a.TLS.Cert, "redis-tls-cert", "", "PEM client certificate, for a Redis that asks for one (with --redis-tls-key)")
	fl.StringVar(&a.TLS.Key, "redis-tls-key", "", "PEM key of --redis-tls-cert")
	fl.BoolVar(&a.TLS.SkipHostnameVerification, "redis-tls-skip-hostname-verification", false, "check Redis's certificate chain but not the host name in it")
	fl.StringVar(&a.TLS.ServerName, "redis-tls-server-name", "", "name Redis's certificate must carry, also sent as SNI (default: the host dialled)")
	fl.StringVar(&a.Sentinel, "redis-sentinel", "", "master@host:port[,host:port...]: the master set and its Redis Sentinels, which name the master and follow its failovers (instead of --redis with --redis-sentinel-master)")
	fl.StringVar(&a.SentinelMaster, "redis-sentinel-master", "", "the master set's name: --redis then lists Redis Sentinels, which name the master and follow its failovers")
	fl.StringVar(&a.SentinelUsername, "redis-sentinel-username", "", "ACL user for the Sentinels themselves")
	fl.StringVar(&a.SentinelPassword, "redis-sentinel-password", "", "password for the Sentinels themselves (not the master's: that is --redis-password)")
}
