package faults

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy is a TCP proxy on a free loopback port between a client and a
// server, able to inject faults: latency, a dead link that swallows traffic,
// connection resets, a cut. It is toxiproxy, used as a library.
type Proxy struct {
	proxy  *toxiproxy.Proxy
	toxics atomic.Int64
}

// StartProxy proxies a free 127.0.0.1 port to upstream until the test ends.
func StartProxy(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	logger := zerolog.Nop()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), logger)
	p := toxiproxy.NewProxy(server, "proxy-"+strings.ReplaceAll(upstream, ":", "-"), "127.0.0.1:0", upstream)
	p.Logger = &logger
	if err := p.Start(); err != nil {
		tb.Fatalf("faults: starting a proxy to %s: %v", upstream, err)
	}
	tb.Cleanup(p.Stop)
	return &Proxy{proxy: p}
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.proxy.Listen }

// AddLatency delays every reply from upstream by ms milliseconds.
func (p *Proxy) AddLatency(tb testing.TB, ms int) {
	p.add(tb, "latency", "downstream", fmt.Sprintf(`{"latency": %d}`, ms))
}

// AddTimeout makes the link swallow data and never answer: a server that
// hangs.
func (p *Proxy) AddTimeout(tb testing.TB) { p.add(tb, "timeout", "upstream", `{"timeout": 0}`) }

// AddResetPeer resets connections (TCP RST) as data arrives.
func (p *Proxy) AddResetPeer(tb testing.TB) { p.add(tb, "reset_peer", "upstream", `{"timeout": 0}`) }

// Heal removes every fault.
func (p *Proxy) Heal() { p.proxy.Toxics.ResetToxics(context.Background()) }

// Cut closes the listener and every connection through it; Restore opens
// them again on the same address.
func (p *Proxy) Cut() { p.proxy.Stop() }

// Restore undoes Cut.
func (p *Proxy) Restore(tb testing.TB) {
	tb.Helper()
	if err := p.proxy.Start(); err != nil {
		tb.Fatalf("faults: restoring the proxy on %s: %v", p.Addr(), err)
	}
}

func (p *Proxy) add(tb testing.TB, kind, stream, attributes string) {
	tb.Helper()
	name := fmt.Sprintf("%s-%d", kind, p.toxics.Add(1))
	body := fmt.Sprintf(`{"name": %q, "type": %q, "stream": %q, "toxicity": 1, "attributes": %s}`, name, kind, stream, attributes)
	if _, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		tb.Fatalf("faults: adding %s: %v", kind, err)
	}
}
