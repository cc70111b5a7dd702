#!/usr/bin/env bash
# Runs the whole test suite while the machine is busy: BUSY_BURNERS (default
# 2) CPU-bound processes spin beside it for the whole run, so that a test
# whose outcome depends on being scheduled on time fails here instead of on
# a developer's or CI's loaded machine. Runs the suite BUSY_RUNS times (default
# 2) with the race detector, as .ci/run does, and fails if any run fails.
#
#   scripts/busy-test.sh                    # twice, two burners
#   BUSY_RUNS=5 scripts/busy-test.sh ./failover ./cluster
#
# Arguments are the packages (default: every module's, as in the README's
# test command). The burners are this script's
# own children, stopped by PID when it ends, however it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${BUSY_RUNS:-2}
burners=${BUSY_BURNERS:-2}
packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(./... ./cmd/... ./cluster/... ./grpclimit/... ./serviceclient/... ./benchmarks/... ./internal/faults/... ./deploy/... ./telemetry/...)

pids=()
stop_burners() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_burners EXIT
for _ in $(seq "$burners"); do
	# A bounded spin: it ends by itself if this script is killed hard.
	timeout 3600 sh -c 'while :; do :; done' &
	pids+=("$!")
done
echo "== busy-test: $burners CPU-bound processes (PIDs ${pids[*]}) beside $runs runs of go test -race ${packages[*]}"

failed=0
for run in $(seq "$runs"); do
	echo "== busy-test: run $run of $runs, load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
	start=$(date +%s)
	if go test -race -count=1 -timeout 45m "${packages[@]}"; then
		echo "== busy-test: run $run passed in $(($(date +%s) - start)) s"
	else
		echo "== busy-test: run $run FAILED after $(($(date +%s) - start)) s"
		failed=1
	fi
done
exit "$failed"
