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
	// PasswordFile is a file that holds the password (--redis-password-file),
	// read once at start, one trailing newline dropped: how a Kubernetes
	// or Docker secret is mounted. It is refused together with a password
	// from the flag or a URL, rather than one silently winning.
	PasswordFile string
	// TLS turns TLS on (--redis-tls; a rediss:// URL does too).
	TLS RedisTLS
	// SentinelMaster, when set, makes the --redis addresses those of Redis
	// Sentinels that watch the master set of that name
	// (--redis-sentinel-master).
	SentinelMaster string
	// Sentinel is --redis-sentinel, master@host:port[,host:port...]: the
	// master set's name and its Sentinels' addresses in one setting, in
	// place of --redis-sentinel-master with --redis.
	Sentinel string
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
	// ServerName is the name the server's certificate must carry
	// (--redis-tls-server-name; default: the host of the address dialled),
	// also sent as SNI: for a Redis reached by an IP address or through a
	// tunnel whose certificate names its DNS name.
	ServerName string
}

// errRedisURL marks a --redis that cannot be read.
var errRedisURL = errors.New("want host:port, redis://[user:password@]host:port[/db], rediss://… for TLS " +
	"or unix://[user:password@]/path/to/redis.sock[?db=N] for a Unix socket")

// redisConfig is redisstore's Config from cfg: the addresses of --redis
// (plain host:port or URLs), the credentials, database and TLS that the
// URLs and the flags give.
func redisConfig(cfg Config) (redisstore.Config, error) {
	rc := redisstore.Config{KeyPrefix: cfg.RedisPrefix, Timeout: cfg.StoreTimeout,
		Username: cfg.RedisAuth.Username, Password: cfg.RedisAuth.Password, WrapClient: cfg.WrapRedis}
	useTLS := cfg.RedisAuth.TLS.Enabled
	var fromURL *redisURL
	addrs, master, err := redisAddrs(cfg)
	if err != nil {
		return redisstore.Config{}, err
	}
	for _, raw := range addrs {
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
	if rc.Password, err = passwordFromFile(cfg.RedisAuth.PasswordFile, rc.Password); err != nil {
		return redisstore.Config{}, err
	}
	if useTLS {
		t, err := tlsConfig(cfg.RedisAuth.TLS)
		if err != nil {
			return redisstore.Config{}, err
		}
		rc.TLS = t
	} else if t := cfg.RedisAuth.TLS; t.CA != "" || t.Cert != "" || t.Key != "" || t.SkipHostnameVerification || t.ServerName != "" {
		return redisstore.Config{}, errors.New("--redis-tls-*: TLS settings given without TLS: add --redis-tls or use a rediss:// URL")
	}
	a := cfg.RedisAuth
	rc.Sentinel = redisstore.Sentinel{MasterSet: master, Username: a.SentinelUsername, Password: a.SentinelPassword}
	if master == "" && (a.SentinelUsername != "" || a.SentinelPassword != "") {
		return redisstore.Config{}, errors.New("--redis-sentinel-username/--redis-sentinel-password given without --redis-sentinel-master or --redis-sentinel")
	}
	return rc, nil
}

// UsesRedis reports whether the service counts in Redis: --redis or
// --redis-sentinel is given.
func (c Config) UsesRedis() bool { return len(c.Redis) > 0 || c.RedisAuth.Sentinel != "" }

// redisAddrs is --redis's addresses and --redis-sentinel-master, or what
// --redis-sentinel says instead: one form or the other, never both
// (which would leave unsaid which addresses are the Sentinels).
func redisAddrs(cfg Config) (addrs []string, master string, err error) {
	a := cfg.RedisAuth
	if a.Sentinel == "" {
		return cfg.Redis, a.SentinelMaster, nil
	}
	if len(cfg.Redis) > 0 || a.SentinelMaster != "" {
		return nil, "", errors.New("--redis-sentinel names the master set and its Sentinels: give it alone, without --redis or --redis-sentinel-master")
	}
	master, addrs, err = ParseSentinel(a.Sentinel)
	if err != nil {
		return nil, "", fmt.Errorf("--redis-sentinel %w", err)
	}
	return addrs, master, nil
}

// ParseSentinel reads --redis-sentinel's master@host:port,host:port into
// the master set's name and the Sentinels' addresses.
func ParseSentinel(s string) (master string, addrs []string, err error) {
	master, list, ok := strings.Cut(s, "@")
	if !ok || master == "" || list == "" {
		return "", nil, fmt.Errorf("%q: want master@host:port[,host:port...], the master set's name and its Sentinels", s)
	}
	for _, a := range strings.Split(list, ",") {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return "", nil, fmt.Errorf("%q: Sentinel %q: want host:port: %w", s, a, err)
		}
		addrs = append(addrs, a)
	}
	return master, addrs, nil
}

// passwordFromFile is the password in path (none: given, the password of
// the flag or URL), its one trailing newline dropped. A file and another
// password are refused: which one wins would be a guess.
func passwordFromFile(path, given string) (string, error) {
	if path == "" {
		return given, nil
	}
	if given != "" {
		return "", errors.New("--redis-password-file: a password is given by --redis-password or the --redis URL too: give it once")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--redis-password-file: %w", err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", fmt.Errorf("--redis-password-file %s: the file is empty", path)
	}
	return pw, nil
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
	if t.ServerName != "" && t.SkipHostnameVerification {
		return nil, errors.New("--redis-tls-server-name names the certificate's name to check and --redis-tls-skip-hostname-verification checks none: give one")
	}
	c.ServerName = t.ServerName
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
