#!/usr/bin/env bash
# Measures what distinct keys cost `floodgate serve` in resident memory, and
# that --max-keys bounds it: for each bound, a fresh serve (memory store,
# built-in policy) receives KEYS explicit-limit calls on distinct keys (a
# 1-per-hour fixed window, so no key is back to full and none is dropped
# for that), sent by `floodgate bench`; VmRSS is read from /proc before and
# after. Everything listens on 127.0.0.1 and stops by itself. Linux only.
# Settings (environment):
#   FLOODGATE_RSS_KEYS         calls, each on a new key (default 2000000)
#   FLOODGATE_RSS_MAX_KEYS     the --max-keys values to compare, space-separated
#                              (default "100000 0"; 0 is unbounded)
#   FLOODGATE_RSS_CONCURRENCY  bench callers (default 64)
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${FLOODGATE_RSS_KEYS:-2000000}
bounds=${FLOODGATE_RSS_MAX_KEYS:-"100000 0"}
conc=${FLOODGATE_RSS_CONCURRENCY:-64}
dir=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
go build -o "$dir/floodgate" ./cmd/floodgate
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; } # KiB
port() { # a free port on 127.0.0.1
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
printf '%-10s %10s %12s %12s %12s %10s\n' max-keys calls rss-before rss-after grown B/call
for bound in $bounds; do
	http=127.0.0.1:$(port)
	"$dir/floodgate" serve --http "$http" --grpc 127.0.0.1:0 --max-keys "$bound" 2>"$dir/serve.log" &
	pid=$!
	for _ in $(seq 100); do
		curl -fsS "http://$http/healthz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	before=$(rss "$pid")
	"$dir/floodgate" bench --target http --addr "$http" --limit fixed_window:1/1h \
		--keys 1000000000 --requests "$keys" --concurrency "$conc" --duration 30m >"$dir/bench.txt"
	after=$(rss "$pid")
	grep -E '^(calls|errors)' "$dir/bench.txt" | tr -s ' \t' ' ' | sed 's/^/# /' >&2
	printf '%-10s %10d %9d KiB %9d KiB %9d KiB %10.0f\n' "$bound" "$keys" "$before" "$after" \
		$((after - before)) "$(echo "($after - $before) * 1024 / $keys" | bc -l)"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
done
