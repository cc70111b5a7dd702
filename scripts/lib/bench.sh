# Helpers of the side-by-side benchmark scripts (scripts/bench-*.sh); sourced,
# not run. The sourcing script sets $prog (its name, for messages) first and
# calls start_work before the others.

# start_work makes the scratch directory $work and the list $pids of the
# processes the script starts; on exit they are stopped, by PID, and the
# directory removed.
start_work() {
	work=$(mktemp -d)
	pids=()
	trap stop_work EXIT
}

stop_work() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$work"
}

# pin_from VAR: with $VAR set to 1, the arrays svc_pin and bench_pin
# prefix the services' commands (and Redis's) with taskset -c 0 and the load
# generator's with taskset -c 1, so that the load does not take the
# services' CPU; both are empty otherwise.
pin_from() {
	svc_pin=() bench_pin=()
	[ "${!1:-}" = 1 ] || return 0
	command -v taskset >/dev/null || { echo "$prog: $1 needs taskset" >&2; exit 1; }
	svc_pin=(taskset -c 0) bench_pin=(taskset -c 1)
}

# wait_port PORT: until something listens on 127.0.0.1:PORT (30 s at most).
wait_port() {
	for _ in $(seq 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "$prog: nothing listens on 127.0.0.1:$1; logs in $work" >&2
	exit 1
}

# cpu_ticks PID: its utime+stime, in clock ticks (getconf CLK_TCK per second).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# children_ms FILE: the CPU time (user+system) of this shell's finished
# children, in ms, into $work/FILE.
children_ms() {
	times >"$work/times"
	awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); t += p[1] * 60000 + p[2] * 1000 } printf "%d", t }' "$work/times" >"$work/$1"
}

# awk_median is an awk function, median(a, n), of a[1..n]; paste it into an
# awk program.
awk_median='
function median(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}'

# awk_spread is an awk function, spread(name, col, label), that prints
# floodgate's ratio to service name in column col of v[round, service,
# col], per round: the median and min..max. It needs awk_median, the
# variables rounds and width (of the service's name) and the array v.
awk_spread='
function spread(name, col, label,   r, a, n, lo, hi) {
	n = 0
	for (r = 1; r <= rounds; r++) { a[++n] = v[r, "floodgate", col] / v[r, name, col] }
	lo = hi = a[1]
	for (r = 2; r <= n; r++) { if (a[r] < lo) lo = a[r]; if (a[r] > hi) hi = a[r] }
	printf "floodgate / %-*s %-12s %.2fx (rounds %.2f..%.2f)\n", width, name, label, median(a, n), lo, hi
}'
