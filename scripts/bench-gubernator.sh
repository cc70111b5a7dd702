#!/usr/bin/env bash
# Measures `floodgate serve` in memory against a single gubernator node on the
# same load (docs/benchmarks.md, "floodgate serve vs gubernator (in memory)",
# explains the figures): one token bucket of 1,000,000 per minute per key, a
# limit no key reaches, `floodgate bench` closed loop over gRPC. Three services
# run side by side, each idle while another is measured:
#   gubernator           one node with its defaults (member-list discovery
#                        knowing only itself; traces recorded, exported nowhere:
#                        OTEL_TRACES_EXPORTER=none), GetRateLimits with
#                        TOKEN_BUCKET and BATCHING (its default behavior),
#                        `floodgate bench --target gubernator`
#   gubernator-untraced  the same with OTEL_TRACES_SAMPLER=always_off
#   floodgate            floodgate serve --config (the same token bucket as a
#                        policy), no --redis: counts in memory; ShouldRateLimit,
#                        `floodgate bench --target grpc`
# Each round measures all three in a rotating order; before each run a
# warm-up run is thrown away. Each service's CPU time
# (utime+stime from /proc/PID/stat) over the measured run is divided by its
# decisions. Everything listens on 127.0.0.1; the script stops what it
# started, by PID. Settings (environment):
#   FLOODGATE_GUBERNATOR           gubernator's binary (required; go build ./cmd/gubernator in its clone)
#   FLOODGATE_GUBER_BENCH_SECONDS  length of each measured run (default 8)
#   FLOODGATE_GUBER_BENCH_WARMUP   length of each warm-up run (default 2)
#   FLOODGATE_GUBER_BENCH_ROUNDS   rounds (default 3)
#   FLOODGATE_GUBER_BENCH_CONC     closed-loop callers (default 64)
#   FLOODGATE_GUBER_BENCH_KEYS     distinct keys (default 10000; gubernator's default cache holds 50,000)
#   FLOODGATE_GUBER_BENCH_PORT     first of the 8 consecutive ports used (default 17480)
#   FLOODGATE_GUBER_BENCH_PIN      1: the services on CPU 0, the load generator on CPU 1
#                                  (taskset), so that the load does not take the services' CPU
# Needs jq and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
prog=bench-gubernator
. scripts/lib/bench.sh

guber=${FLOODGATE_GUBERNATOR:?set FLOODGATE_GUBERNATOR to the gubernator binary}
secs=${FLOODGATE_GUBER_BENCH_SECONDS:-8}
warm=${FLOODGATE_GUBER_BENCH_WARMUP:-2}
rounds=${FLOODGATE_GUBER_BENCH_ROUNDS:-3}
conc=${FLOODGATE_GUBER_BENCH_CONC:-64}
keys=${FLOODGATE_GUBER_BENCH_KEYS:-10000}
port=${FLOODGATE_GUBER_BENCH_PORT:-17480}
for tool in jq curl; do
	command -v "$tool" >/dev/null || { echo "$prog: $tool not found" >&2; exit 1; }
done
[ -x "$guber" ] || { echo "$prog: $guber is not an executable" >&2; exit 1; }
pin_from FLOODGATE_GUBER_BENCH_PIN

start_work

go build -o "$work/floodgate" ./cmd/floodgate
# The same limit for both: Floodgate's token bucket refills continuously,
# gubernator's restores the whole limit one duration after the first hit;
# at 1,000,000 a minute per key neither ever denies, so every call is a
# decision that counts a hit.
limit=token_bucket:1000000/1m
cat >"$work/bench.yaml" <<'EOF'
domain: bench
descriptors:
  - key: user
    rate_limit:
      algorithm: token_bucket
      unit: minute
      requests_per_unit: 1000000
EOF

declare -A addr pid
names=(gubernator gubernator-untraced floodgate)
# gubernator NAME FIRST_PORT [VAR=VALUE...] starts a node: gRPC on
# FIRST_PORT, HTTP on the next, its member list (knowing only itself) on the
# third; once it has found itself, since until then every call fails with
# "unable to pick a peer".
gubernator() {
	local name=$1 p=$2
	shift 2
	(cd "$work" && exec env OTEL_TRACES_EXPORTER=none \
		GUBER_GRPC_ADDRESS="127.0.0.1:$p" GUBER_HTTP_ADDRESS="127.0.0.1:$((p + 1))" \
		GUBER_MEMBERLIST_ADDRESS="127.0.0.1:$((p + 2))" GUBER_MEMBERLIST_BIND_ADDRESS="127.0.0.1:$((p + 2))" \
		GUBER_MEMBERLIST_KNOWN_NODES="127.0.0.1:$((p + 2))" "$@" "${svc_pin[@]}" "$guber" >"$work/$name.log" 2>&1) &
	pids+=($!)
	pid[$name]=$!
	addr[$name]=127.0.0.1:$p
	wait_port "$p"
	for _ in $(seq 100); do
		grep -q '"peer_count":1' <(curl -s "http://127.0.0.1:$((p + 1))/v1/HealthCheck" 2>/dev/null) && return
		sleep 0.1
	done
	echo "$prog: $name found no peer; logs in $work" >&2
	exit 1
}
gubernator gubernator "$port"
gubernator gubernator-untraced $((port + 3)) OTEL_TRACES_SAMPLER=always_off
"${svc_pin[@]}" "$work/floodgate" serve --config "$work/bench.yaml" \
	--http "127.0.0.1:$((port + 6))" --grpc "127.0.0.1:$((port + 7))" >"$work/floodgate.log" 2>&1 &
pids+=($!)
pid[floodgate]=$!
addr[floodgate]=127.0.0.1:$((port + 7))
wait_port $((port + 7))

hz=$(getconf CLK_TCK)
bench() { # bench SERVICE SECONDS: one closed-loop run, its JSON report on stdout
	local target=(--target grpc)
	[ "$1" != floodgate ] && target=(--target gubernator --limit "$limit")
	"${bench_pin[@]}" "$work/floodgate" bench "${target[@]}" --addr "${addr[$1]}" --concurrency "$conc" --keys "$keys" \
		--domain bench --descriptor-key user --duration "${2}s" --json
}

echo "uptime before: $(uptime)"
printf "round\tservice\tdecisions/s\tp50_ms\tp99_ms\terrors\tdenied\tcpu_us/dec\tbench_us/dec\n"
results=$work/results.tsv
for r in $(seq "$rounds"); do
	for i in 0 1 2; do
		n=${names[$(((i + r - 1) % 3))]}
		bench "$n" "$warm" >/dev/null
		c0=$(cpu_ticks "${pid[$n]}")
		children_ms b0
		bench "$n" "$secs" >"$work/out.json"
		children_ms b1
		c1=$(cpu_ticks "${pid[$n]}")
		jq -r --arg n "$n" --arg r "$r" --argjson cpu $((c1 - c0)) \
			--argjson bcpu $(($(<"$work/b1") - $(<"$work/b0"))) --argjson hz "$hz" \
			'def r2: . * 100 | round / 100;
			 [$r, $n, (.calls_per_second | round), (.latency_ns.p50 / 1e6 | r2), (.latency_ns.p99 / 1e6 | r2),
			  .errors, .denied, ($cpu / $hz / .calls * 1e6 | r2), ($bcpu / .calls * 1e3 | r2)] | @tsv' "$work/out.json" | tee -a "$results"
	done
done
echo "uptime after: $(uptime)"

# Medians per service, and floodgate's ratio to each gubernator per round
# (median, and min..max over the rounds).
awk -F'\t' -v rounds="$rounds" -v width=19 "$awk_median$awk_spread"'
{ for (c = 3; c <= 9; c++) v[$1, $2, c] = $c }
END {
	printf "\nmedians of %d rounds\n%-19s %12s %9s %9s %10s %12s\n", rounds, "service", "decisions/s", "p50 ms", "p99 ms", "CPU us/dec", "bench us/dec"
	split("gubernator gubernator-untraced floodgate", names, " ")
	for (k = 1; k <= 3; k++) {
		printf "%-19s", names[k]
		split("3 4 5 8 9", cols, " ")
		for (m = 1; m <= 5; m++) {
			n = 0
			for (r = 1; r <= rounds; r++) a[++n] = v[r, names[k], cols[m]]
			printf(m == 1 ? " %12.0f" : (m == 4 ? " %10.1f" : (m == 5 ? " %12.1f" : " %9.2f")), median(a, n))
		}
		printf "\n"
	}
	printf "\n"
	spread("gubernator", 3, "decisions/s"); spread("gubernator", 5, "p99"); spread("gubernator", 8, "CPU/dec")
	spread("gubernator-untraced", 3, "decisions/s"); spread("gubernator-untraced", 5, "p99"); spread("gubernator-untraced", 8, "CPU/dec")
}' "$results"
