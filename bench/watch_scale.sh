#!/usr/bin/env bash
# The watch benchmark: one podscope-coordinator watching RANKS simulated ranks
# streamed by AGENTS agents (hosted by PROCS podscope_agent_swarm processes), every rank
# summarising every step. Prints the coordinator's CPU and memory while it keeps up, the
# summaries it took per second, and the watch data's bytes per rank per step on the wire.
#   bench/watch_scale.sh [AGENTS=16] [RANKS=1024] [PROCS=4] [SECONDS=30]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/build_env.sh"
AGENTS="${1:-16}"
RANKS="${2:-1024}"
PROCS="${3:-4}"
MEASURE="${4:-30}"
podscope_install_deps
podscope_build >/dev/null
BIN="$PODSCOPE_BUILD_DIR"
RUN="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$RUN"
}
trap cleanup EXIT

echo '{"agents": {"max_connections_per_client": 100000, "max_unauthenticated_per_client": 100000, "max_unauthenticated_connections": 100000}}' >"$RUN/coordinator.json"
# --insecure: many agents in few processes from one address; this measures the watch, not TLS.
"$BIN/bin/podscope-coordinator" --insecure --http 127.0.0.1:0 --grpc 127.0.0.1:0 --data-dir "$RUN/store" \
  --config "$RUN/coordinator.json" >"$RUN/coordinator.log" 2>&1 &
COORDINATOR=$!
PIDS+=($COORDINATOR)
for i in $(seq 1 100); do grep -q 'listening on http' "$RUN/coordinator.log" && break; sleep 0.05; done
GRPC="127.0.0.1:$(grep -oE 'agents on grpc://[0-9.]+:[0-9]+' "$RUN/coordinator.log" | grep -oE '[0-9]+$')"
HTTP="http://127.0.0.1:$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$RUN/coordinator.log" | grep -oE '[0-9]+$')"

PER_AGENT=$(( RANKS / AGENTS ))
PER_PROC=$(( (AGENTS + PROCS - 1) / PROCS ))
for p in $(seq 0 $(( PROCS - 1 ))); do
  FIRST=$(( p * PER_PROC ))
  COUNT=$(( AGENTS - FIRST < PER_PROC ? AGENTS - FIRST : PER_PROC ))
  [ "$COUNT" -le 0 ] && break
  "$BIN/bench/podscope_agent_swarm" --grpc "$GRPC" --server "$HTTP" --serve-only --watch --job watched \
    --first-agent "$FIRST" --agents "$COUNT" --total-agents "$AGENTS" --ranks-per-agent "$PER_AGENT" \
    --sim-world 32 >"$RUN/swarm-$p.log" 2>&1 &
  PIDS+=($!)
done

metric() { curl -s "$HTTP/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$COORDINATOR/stat"; }
podscope_log "$AGENTS agents, $RANKS ranks ($PER_AGENT per agent) in $PROCS processes; warming up 30 s"
sleep 30
steps0=$(metric podscope_watch_steps_total); bytes0=$(metric podscope_watch_bytes_total); cpu0=$(cpu_ticks); t0=$(date +%s.%N)
sleep "$MEASURE"
steps1=$(metric podscope_watch_steps_total); bytes1=$(metric podscope_watch_bytes_total); cpu1=$(cpu_ticks); t1=$(date +%s.%N)
rss_kb=$(awk '/VmRSS/ { print $2 }' "/proc/$COORDINATOR/status")
hz=$(getconf CLK_TCK)
ranks_seen=$(curl -s "$HTTP/metrics" | awk '/^podscope_watch_job_ranks/ { print $2 }')
dropped=$(metric podscope_watch_agent_dropped_steps_total)
python3 - "$steps0" "$steps1" "$bytes0" "$bytes1" "$cpu0" "$cpu1" "$t0" "$t1" "$rss_kb" "$hz" "$ranks_seen" "$dropped" <<'PY'
import sys
s0, s1, b0, b1, c0, c1 = (float(x) for x in sys.argv[1:7])
t0, t1, rss, hz, ranks, dropped = float(sys.argv[7]), float(sys.argv[8]), float(sys.argv[9]), float(sys.argv[10]), sys.argv[11], sys.argv[12]
dt = t1 - t0
steps = s1 - s0
print(f"ranks in the window:           {ranks}")
print(f"summaries taken:               {steps / dt:,.0f} per second ({steps / dt / float(ranks or 1):.1f} steps/s per rank)")
print(f"coordinator CPU:               {100 * (c1 - c0) / hz / dt:.1f}% of one core")
print(f"coordinator memory (RSS):      {rss / 1024:.0f} MiB")
print(f"watch data on the wire:        {(b1 - b0) / max(steps, 1):.0f} bytes per rank per step")
print(f"summaries dropped by agents:   {dropped}")
PY
