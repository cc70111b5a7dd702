#!/usr/bin/env bash
# Benchmarks `floodgate proxy` (docs/proxy.md explains the figures):
#   1. in memory, without a network: bare httputil.ReverseProxy vs the
#      floodgate proxy admitting and refusing (Go benchmark);
#   2. over loopback with wrk: bare reverse proxy vs floodgate proxy with an
#      always-allow limit, in alternating rounds, in front of nginx;
#   3. nginx limit_req vs the equivalent floodgate limit, nodelay (token
#      bucket) and delayed (leaky bucket): admitted per second and throughput.
# Needs wrk and nginx: apt-get install -y wrk nginx. Everything listens on
# 127.0.0.1 and stops by itself. Settings (environment):
#   FLOODGATE_PROXY_BENCH_SECONDS  length of each wrk run (default 10)
#   FLOODGATE_PROXY_BENCH_ROUNDS   rounds of bare vs floodgate (default 5)
#   FLOODGATE_PROXY_BENCH_CONNS    wrk connections (default 64)
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in wrk nginx; do
	command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || {
		echo "bench-proxy: $tool not found; apt-get install -y wrk nginx" >&2
		exit 1
	}
done
go test -run '^$' -bench InMemory -benchmem -count "${FLOODGATE_PROXY_BENCH_COUNT:-3}" ./cmd/internal/proxy/
FLOODGATE_PROXY_BENCH=1 go test -run TestProxyBenchmark -v -count=1 -timeout 15m ./cmd/internal/proxy/ 2>&1 |
	grep -v 'http: proxy error: context canceled' # wrk hangs up on requests in flight when it stops
