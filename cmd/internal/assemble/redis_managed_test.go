package assemble

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// oneLimit is a limit that a test's few decisions never exhaust.
var oneLimit = floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1000, Period: time.Minute}

// A Redis that asks for client certificates (--tls-auth-clients yes) is
// reached with --redis-tls-cert and --redis-tls-key; without one, or with
// one its CA did not sign, the start stops. --redis-tls-server-name
// checks the name a certificate carries when the address is not it.
func TestRedisOverMutualTLS(t *testing.T) {
	requireTLS(t)
	ca, stranger := testkit.NewCA(t, "redis CA"), testkit.NewCA(t, "another CA")
	serverCert, serverKey := ca.IssueCert(t, "redis", "redis.internal").Files(t)
	port := freeTCPPort(t)
	testkit.StartServer(t, testkit.WithArgs("--tls-port", strconv.Itoa(port),
		"--tls-cert-file", serverCert, "--tls-key-file", serverKey,
		"--tls-ca-cert-file", ca.File(t), "--tls-auth-clients", "yes"))
	redis := "rediss://127.0.0.1:" + strconv.Itoa(port)
	clientCert, clientKey := ca.IssueCert(t, "floodgate").Files(t)
	strangerCert, strangerKey := stranger.IssueCert(t, "floodgate").Files(t)
	caFile := ca.File(t)
	tests := []struct {
		name    string
		tls     RedisTLS
		wantErr string
	}{
		{name: "client certificate and server name",
			tls: RedisTLS{CA: caFile, Cert: clientCert, Key: clientKey, ServerName: "redis.internal"}},
		{name: "no client certificate", tls: RedisTLS{CA: caFile, ServerName: "redis.internal"}, wantErr: "--redis"},
		{name: "client certificate of another CA",
			tls: RedisTLS{CA: caFile, Cert: strangerCert, Key: strangerKey, ServerName: "redis.internal"}, wantErr: "--redis"},
		{name: "address not in the certificate",
			tls: RedisTLS{CA: caFile, Cert: clientCert, Key: clientKey}, wantErr: "doesn't contain any IP SANs"},
		{name: "server name not in the certificate",
			tls: RedisTLS{CA: caFile, Cert: clientCert, Key: clientKey, ServerName: "cache.internal"}, wantErr: "not cache.internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := openRedis(t, []string{redis}, RedisAuth{TLS: tt.tls})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Open = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			decideOnce(t, st)
		})
	}
}

// --redis-sentinel master@host:port names the master set and its
// Sentinel; when the Sentinel fails the master over to its replica, the
// store follows: decisions keep being counted, now on the new master
// (a write sent to the old one, a replica by then, would fail READONLY).
func TestRedisFollowsASentinelFailover(t *testing.T) {
	master := testkit.StartServer(t, testkit.WithPassword("m4ster"), testkit.WithArgs("--masterauth", "m4ster"))
	replica := testkit.StartServer(t, testkit.WithPassword("m4ster"), testkit.WithArgs("--masterauth", "m4ster",
		"--replicaof", "127.0.0.1", strconv.Itoa(master.Port())))
	sentinel := testkit.StartSentinel(t, "mymaster", master.Addr(), "m4ster")
	sentinel.WaitFor(t, "it knows the replica in sync", func() bool {
		r, err := sentinel.Command("SENTINEL", "replicas", "mymaster")
		return err == nil && strings.Contains(r.String(), replica.Addr()[len("127.0.0.1:"):]) &&
			strings.Contains(replica.Do(t, "INFO", "replication"), "master_link_status:up")
	})
	st, err := openRedis(t, nil, RedisAuth{Sentinel: "mymaster@" + sentinel.Addr, Password: "m4ster"})
	if err != nil {
		t.Fatal(err)
	}
	// decide reports whether a decision on a key of its own was counted
	// on the Redis at addr (the limits fail closed: a store that did not
	// answer denies).
	n := 0
	decide := func(addr *testkit.Server) bool {
		n++
		key := t.Name() + strconv.Itoa(n)
		d, err := st.Default().AllowN(context.Background(), key, oneLimit, 1)
		return err == nil && d.Allowed && addr.Do(t, "EXISTS", "auth-test:"+key) == "1"
	}
	if !decide(master) {
		t.Fatal("a decision before the failover was not counted on the master")
	}
	if _, err := sentinel.Command("SENTINEL", "failover", "mymaster"); err != nil {
		t.Fatal(err)
	}
	sentinel.WaitFor(t, "it names the replica as the master", func() bool {
		m, err := sentinel.Master()
		return err == nil && m == replica.Addr()
	})
	// The store learns of the switch from the Sentinel's +switch-master;
	// until then a decision may be denied (the old master, demoted,
	// answers READONLY) or land on the old master before its demotion.
	sentinel.WaitFor(t, "a decision is counted on the new master", func() bool { return decide(replica) })
	if role := replica.Do(t, "ROLE"); !strings.HasPrefix(role, "[master") {
		t.Fatalf("ROLE of the new master = %s", role)
	}
}
