#!/usr/bin/env bash
# Measures `floodgate serve` against envoyproxy/ratelimit on the same load
# (docs/benchmarks.md, "floodgate serve vs envoyproxy/ratelimit", explains
# the figures): one fresh redis-server, one envoyproxy/ratelimit-format YAML
# (fixed window, a limit no key reaches), `floodgate bench` closed loop over
# gRPC ShouldRateLimit. Three services run side by side, each idle while
# another is measured:
#   envoy-default  envoyproxy/ratelimit, stats off, its defaults (pool of 10, no pipelining)
#   envoy-tuned    the same with REDIS_PIPELINE_WINDOW=150us REDIS_PIPELINE_LIMIT=8
#   floodgate      floodgate serve --redis --config (same YAML) --count-denied-hits
# Each round measures all three in a rotating order; before each run Redis
# is flushed and a warm-up run is thrown away. Each service's CPU time
# (utime+stime from /proc/PID/stat) over the measured run is divided by its
# decisions. Everything listens on 127.0.0.1; the script stops what it
# started, by PID. Settings (environment):
#   FLOODGATE_ENVOY_RATELIMIT      envoyproxy/ratelimit's binary (required; go build ./src/service_cmd)
#   FLOODGATE_ENVOY_BENCH_SECONDS  length of each measured run (default 8)
#   FLOODGATE_ENVOY_BENCH_WARMUP   length of each warm-up run (default 2)
#   FLOODGATE_ENVOY_BENCH_ROUNDS   rounds (default 3)
#   FLOODGATE_ENVOY_BENCH_CONC     closed-loop callers (default 64)
#   FLOODGATE_ENVOY_BENCH_KEYS     distinct descriptor values (default 10000)
#   FLOODGATE_ENVOY_BENCH_PORT     first of the 9 consecutive ports used (default 17380)
#   FLOODGATE_ENVOY_BENCH_PIN      1: services and Redis on CPU 0, the load generator on CPU 1
#                                  (taskset), so that the load does not take the services' CPU
# Needs redis-server, redis-cli and jq.
set -euo pipefail
cd "$(dirname "$0")/.."
prog=bench-envoy
. scripts/lib/bench.sh

rl=${FLOODGATE_ENVOY_RATELIMIT:?set FLOODGATE_ENVOY_RATELIMIT to the envoyproxy/ratelimit binary}
secs=${FLOODGATE_ENVOY_BENCH_SECONDS:-8}
warm=${FLOODGATE_ENVOY_BENCH_WARMUP:-2}
rounds=${FLOODGATE_ENVOY_BENCH_ROUNDS:-3}
conc=${FLOODGATE_ENVOY_BENCH_CONC:-64}
keys=${FLOODGATE_ENVOY_BENCH_KEYS:-10000}
port=${FLOODGATE_ENVOY_BENCH_PORT:-17380}
pin_from FLOODGATE_ENVOY_BENCH_PIN
for tool in redis-server redis-cli jq; do
	command -v "$tool" >/dev/null || { echo "bench-envoy: $tool not found" >&2; exit 1; }
done
[ -x "$rl" ] || { echo "bench-envoy: $rl is not an executable" >&2; exit 1; }

start_work

go build -o "$work/floodgate" ./cmd/floodgate
mkdir -p "$work/runtime/ratelimit/config"
cat >"$work/runtime/ratelimit/config/bench.yaml" <<'EOF'
domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 1000000
EOF

redis_port=$port
"${svc_pin[@]}" redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
pids+=($!)
redis_pid=$!

# envoy NAME HTTP_PORT GRPC_PORT DEBUG_PORT [VAR=VALUE...] starts envoyproxy/ratelimit.
envoy() {
	local name=$1 http=$2 grpc=$3 debug=$4
	shift 4
	env USE_STATSD=false DISABLE_STATS=true LOG_LEVEL=warn \
		REDIS_SOCKET_TYPE=tcp REDIS_URL="127.0.0.1:$redis_port" \
		RUNTIME_ROOT="$work/runtime" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_APPDIRECTORY=config \
		RUNTIME_WATCH_ROOT=false \
		HOST=127.0.0.1 PORT="$http" GRPC_HOST=127.0.0.1 GRPC_PORT="$grpc" \
		DEBUG_HOST=127.0.0.1 DEBUG_PORT="$debug" "$@" "${svc_pin[@]}" "$rl" >"$work/$name.log" 2>&1 &
	pids+=($!)
}


for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
names=(envoy-default envoy-tuned floodgate)
declare -A addr pid
envoy envoy-default $((port + 1)) $((port + 2)) $((port + 3))
pid[envoy-default]=$!
envoy envoy-tuned $((port + 4)) $((port + 5)) $((port + 6)) REDIS_PIPELINE_WINDOW=150us REDIS_PIPELINE_LIMIT=8
pid[envoy-tuned]=$!
"${svc_pin[@]}" "$work/floodgate" serve --redis "127.0.0.1:$redis_port" --config "$work/runtime/ratelimit/config" \
	--http "127.0.0.1:$((port + 7))" --grpc "127.0.0.1:$((port + 8))" --count-denied-hits >"$work/floodgate.log" 2>&1 &
pids+=($!)
pid[floodgate]=$!
addr[envoy-default]=127.0.0.1:$((port + 2))
addr[envoy-tuned]=127.0.0.1:$((port + 5))
addr[floodgate]=127.0.0.1:$((port + 8))
for n in "${names[@]}"; do wait_port "${addr[$n]#*:}"; done

hz=$(getconf CLK_TCK)
bench() { # bench ADDR SECONDS: one closed-loop run, its JSON report on stdout
	"${bench_pin[@]}" "$work/floodgate" bench --target grpc --addr "$1" --concurrency "$conc" --keys "$keys" \
		--domain bench --descriptor-key user --duration "${2}s" --json
}

echo "uptime before: $(uptime)"
printf "round\tservice\tdecisions/s\tp50_ms\tp99_ms\terrors\tdenied\tcpu_us/dec\tredis_us/dec\tbench_us/dec\n"
results=$work/results.tsv
for r in $(seq "$rounds"); do
	for i in 0 1 2; do
		n=${names[$(((i + r - 1) % 3))]}
		redis-cli -p "$redis_port" flushall >/dev/null
		bench "${addr[$n]}" "$warm" >/dev/null
		c0=$(cpu_ticks "${pid[$n]}")
		r0=$(cpu_ticks "$redis_pid")
		children_ms b0
		bench "${addr[$n]}" "$secs" >"$work/out.json"
		children_ms b1
		c1=$(cpu_ticks "${pid[$n]}")
		r1=$(cpu_ticks "$redis_pid")
		jq -r --arg n "$n" --arg r "$r" --argjson cpu $((c1 - c0)) --argjson rcpu $((r1 - r0)) \
			--argjson bcpu $(($(<"$work/b1") - $(<"$work/b0"))) --argjson hz "$hz" \
			'def r2: . * 100 | round / 100;
			 [$r, $n, (.calls_per_second | round), (.latency_ns.p50 / 1e6 | r2), (.latency_ns.p99 / 1e6 | r2),
			  .errors, .denied, ($cpu / $hz / .calls * 1e6 | r2), ($rcpu / $hz / .calls * 1e6 | r2),
			  ($bcpu / .calls * 1e3 | r2)] | @tsv' "$work/out.json" | tee -a "$results"
	done
done
echo "uptime after: $(uptime)"

# Medians per service, and floodgate's ratio to each envoy variant per round
# (min..max over the rounds, median).
awk -F'\t' -v rounds="$rounds" -v width=13 "$awk_median$awk_spread"'
{ for (c = 3; c <= 10; c++) v[$1, $2, c] = $c }
END {
	printf "\nmedians of %d rounds\n%-13s %12s %9s %9s %10s %12s %12s\n", rounds, "service", "decisions/s", "p50 ms", "p99 ms", "CPU us/dec", "redis us/dec", "bench us/dec"
	split("envoy-default envoy-tuned floodgate", names, " ")
	for (k = 1; k <= 3; k++) {
		printf "%-13s", names[k]
		split("3 4 5 8 9 10", cols, " ")
		for (m = 1; m <= 6; m++) {
			n = 0
			for (r = 1; r <= rounds; r++) a[++n] = v[r, names[k], cols[m]]
			printf(m == 1 ? " %12.0f" : (m == 4 ? " %10.1f" : (m >= 5 ? " %12.1f" : " %9.2f")), median(a, n))
		}
		printf "\n"
	}
	printf "\n"
	spread("envoy-default", 3, "decisions/s"); spread("envoy-default", 5, "p99"); spread("envoy-default", 8, "CPU/dec")
	spread("envoy-tuned", 3, "decisions/s"); spread("envoy-tuned", 5, "p99"); spread("envoy-tuned", 8, "CPU/dec")
}' "$results"
