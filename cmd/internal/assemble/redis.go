package assemble

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/floodgate-io/floodgate/redisstore"
)

// RedisAuth is how the service authenticates to Redis and reaches it:
// the settings that --redis's URLs carry, and their own flags.
type RedisAuth struct {
	// Username and Password are sent with AUTH (--redis-username,
	// --redis-password); a URL's user info says the same, and the two
	// must agree when both are given.
	Username string
	Password string
	// TLS turns TLS on (--redis-tls; a rediss:// URL does too).
	TLS RedisTLS
	// SentinelMaster, when set, makes the --redis addresses those of Redis
	// Sentinels that watch the master set of that name
	// (--redis-sentinel-master).
	SentinelMaster string
	// SentinelUsername and SentinelPassword authenticate to the Sentinels
	// themselves (--redis-sentinel-username, --redis-sentinel-password).
	SentinelUsername string
	SentinelPassword string
}

// RedisTLS is the TLS of the connections to Redis (and to its Sentinels).
type RedisTLS struct {
	Enabled bool
	// CA is a PEM file of the authorities that sign the server's
	// certificate (--redis-tls-ca; default: the system's).
	CA string
	// Cert and Key are a PEM client certificate and its key, for servers
	// that ask for one (--redis-tls-cert, --redis-tls-key).
	Cert string
	Key  string
	// SkipHostnameVerification checks the server's certificate chain but
	// not the name in it (--redis-tls-skip-hostname-verification): for
	// servers reached by an address their certificate does not name.
	SkipHostnameVerification bool
}

// errRedisURL marks a --redis that cannot be read.
var errRedisURL = errors.New("want host:port, redis://[user:password@]host:port[/db], rediss://… for TLS " +
	"or unix://[user:password@]/path/to/redis.sock[?db=N] for a Unix socket")

// redisConfig is redisstore's Config from cfg: the addresses of --redis
// (plain host:port or URLs), the credentials, database and TLS that the
// URLs and the flags give.
func redisConfig(cfg Config) (redisstore.Config, error) {
	rc := redisstore.Config{KeyPrefix: cfg.RedisPrefix, Timeout: cfg.StoreTimeout,
		Username: cfg.RedisAuth.Username, Password: cfg.RedisAuth.Password}
	useTLS := cfg.RedisAuth.TLS.Enabled
	var fromURL *redisURL
	for _, raw := range cfg.Redis {
		u, err := parseRedisAddr(raw)
		if err != nil {
			return redisstore.Config{}, fmt.Errorf("--redis %s: %w", maskRedis(raw), err)
		}
		rc.Addrs = append(rc.Addrs, u.addr)
		if u.unix {
			if len(cfg.Redis) > 1 {
				return redisstore.Config{}, errors.New("--redis: a Unix socket is one standalone Redis: give it alone, not with other addresses")
			}
			rc.Network = redisstore.NetworkUnix
		}
		if !u.url {
			continue
		}
		if fromURL != nil && (u.username != fromURL.username || u.password != fromURL.password || u.db != fromURL.db || u.tls != fromURL.tls) {
			return redisstore.Config{}, fmt.Errorf("--redis: the URLs disagree on credentials, database or TLS: give them once, or the same in each")
		}
		fromURL = &u
	}
	if fromURL != nil {
		var err error
		if rc.Username, err = agree("username", "--redis-username", rc.Username, fromURL.username); err != nil {
			return redisstore.Config{}, err
		}
		if rc.Password, err = agree("password", "--redis-password", rc.Password, fromURL.password); err != nil {
			return redisstore.Config{}, err
		}
		rc.DB, useTLS = fromURL.db, useTLS || fromURL.tls
	}
	if useTLS {
		t, err := tlsConfig(cfg.RedisAuth.TLS)
		if err != nil {
			return redisstore.Config{}, err
		}
		rc.TLS = t
	} else if t := cfg.RedisAuth.TLS; t.CA != "" || t.Cert != "" || t.Key != "" || t.SkipHostnameVerification {
		return redisstore.Config{}, errors.New("--redis-tls-*: TLS settings given without TLS: add --redis-tls or use a rediss:// URL")
	}
	a := cfg.RedisAuth
	rc.Sentinel = redisstore.Sentinel{MasterSet: a.SentinelMaster, Username: a.SentinelUsername, Password: a.SentinelPassword}
	if a.SentinelMaster == "" && (a.SentinelUsername != "" || a.SentinelPassword != "") {
		return redisstore.Config{}, errors.New("--redis-sentinel-username/--redis-sentinel-password given without --redis-sentinel-master")
	}
	return rc, nil
}

// agree is the value of a setting given by a flag, a URL or both; both
// must then say the same.
func agree(what, flag, fromFlag, fromURL string) (string, error) {
	switch {
	case fromURL == "":
		return fromFlag, nil
	case fromFlag == "" || fromFlag == fromURL:
		return fromURL, nil
	}
	return "", fmt.Errorf("--redis: the URL's %s differs from %s: give it once", what, flag)
}

// redisURL is one --redis address, read.
type redisURL struct {
	addr               string
	url                bool // given as a URL: the fields below are its
	username, password string
	db                 int
	tls                bool
	unix               bool // addr is the path of a Unix socket
}

// parseRedisAddr reads host:port, or redis://[user:password@]host:port[/db]
// (rediss:// for TLS).
func parseRedisAddr(raw string) (redisURL, error) {
	if !strings.Contains(raw, "://") {
		if _, _, err := net.SplitHostPort(raw); err != nil {
			return redisURL{}, fmt.Errorf("%w: %w", errRedisURL, err)
		}
		return redisURL{addr: raw}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url's error quotes the whole URL, password included.
		return redisURL{}, errRedisURL
	}
	r := redisURL{url: true, addr: u.Host, username: u.User.Username()}
	r.password, _ = u.User.Password()
	switch u.Scheme {
	case "redis":
	case "rediss":
		r.tls = true
	case "unix", "redis+unix":
		return parseUnixURL(u, r)
	default:
		return redisURL{}, fmt.Errorf("scheme %q: %w", u.Scheme, errRedisURL)
	}
	if u.Port() == "" {
		return redisURL{}, fmt.Errorf("no port: %w", errRedisURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return redisURL{}, fmt.Errorf("query or fragment: %w", errRedisURL)
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		if r.db, err = strconv.Atoi(db); err != nil || r.db < 0 {
			return redisURL{}, fmt.Errorf("database %q: want a number from 0: %w", db, errRedisURL)
		}
	}
	return r, nil
}

// parseUnixURL reads unix://[user:password@]/path/to/redis.sock[?db=N],
// the form of go-redis and rueidis (redis+unix:// too): the path is the
// socket's, so the database is in the query.
func parseUnixURL(u *url.URL, r redisURL) (redisURL, error) {
	r.unix, r.addr = true, u.Path
	if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
		return redisURL{}, fmt.Errorf("%s://%s: want the socket's absolute path after %s://, as in unix:///run/redis.sock: %w", u.Scheme, u.Host, u.Scheme, errRedisURL)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil || u.Fragment != "" {
		return redisURL{}, fmt.Errorf("query or fragment: %w", errRedisURL)
	}
	for k, v := range q {
		if k != "db" || len(v) != 1 {
			return redisURL{}, fmt.Errorf("query %q: only db=N is read: %w", k, errRedisURL)
		}
		if r.db, err = strconv.Atoi(v[0]); err != nil || r.db < 0 {
			return redisURL{}, fmt.Errorf("database %q: want a number from 0: %w", v[0], errRedisURL)
		}
	}
	return r, nil
}

// maskRedis is a --redis fit for logs and errors: URLs' passwords hidden.
func maskRedis(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		u, err := url.Parse(p)
		if err != nil || u.User == nil {
			continue
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// tlsConfig builds the TLS of the connections to Redis from its files.
func tlsConfig(t RedisTLS) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("--redis-tls-ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--redis-tls-ca %s: no PEM certificate in it", t.CA)
		}
	}
	if (t.Cert == "") != (t.Key == "") {
		return nil, errors.New("--redis-tls-cert and --redis-tls-key: give both or neither")
	}
	if t.Cert != "" {
		pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("--redis-tls-cert/--redis-tls-key: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	if t.SkipHostnameVerification {
		// Go checks the name along with the chain; to check the chain
		// alone, skip its check and verify the chain here.
		c.InsecureSkipVerify = true
		c.VerifyPeerCertificate = verifyChain(c.RootCAs)
	}
	return c, nil
}

// verifyChain checks that the server's certificates chain to roots (nil:
// the system's), whatever name they carry.
func verifyChain(roots *x509.CertPool) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("redis: the server sent no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, der := range raw {
			c, err := x509.ParseCertificate(der)
			if err != nil {
				return fmt.Errorf("redis: the server's certificate: %w", err)
			}
			certs[i] = c
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := certs[0].Verify(opts)
		return err
	}
}
