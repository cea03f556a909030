#!/usr/bin/env bash
# One real node's density, live: a coordinator and AGENTS agents on this machine, each serving
# RANKS_PER_AGENT simulated ranks at the dense preset (a real GPU's event rate), capture a WINDOW
# through the REST API. It prints when the capture completed after its window ended, how long the
# summary and stragglers reports then took, what the stragglers report names, and each agent's
# and the coordinator's peak RSS (VmHWM), with each agent's RSS once the upload is done.
#   bench/live_density.sh [AGENTS] [RANKS_PER_AGENT] [WINDOW_S] [STRAGGLER]
#   bench/live_density.sh 2 4 5 5:1.1     (the default: 8 dense ranks, rank 5 10% slower)
# LIVE_DENSITY_PERF=FILE records the coordinator with perf while it answers the reports, and
# LIVE_DENSITY_PERF_CAPTURE=FILE the whole machine from the capture's request to its end.
# LIVE_DENSITY_KEEP=DIR keeps the daemons' logs and the reports there.
# LIVE_DENSITY_WATCH=1 has the agents send their step summaries for watching (off by default, as in the capture
# the figures were taken from).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/build_env.sh"
AGENTS="${1:-2}"
PER_AGENT="${2:-4}"
WINDOW="${3:-5}"
STRAGGLER="${4:-5:1.1}"
WORLD=$((AGENTS * PER_AGENT))
podscope_install_deps
podscope_build_product
BIN="$PODSCOPE_BUILD_DIR/bin"
RUN="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ -n "${LIVE_DENSITY_KEEP:-}" ]; then
    rm -rf "$LIVE_DENSITY_KEEP" && cp -r "$RUN" "$LIVE_DENSITY_KEEP"
  fi
  rm -rf "$RUN"
}
trap cleanup EXIT
now() { date +%s.%N; }
peak_mb() { awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
wait_log() {
  for _ in $(seq 1 400); do grep -qE "$2" "$1" && return 0; sleep 0.05; done
  echo "timed out waiting for \"$2\" in $1" >&2
  cat "$1" >&2
  exit 1
}

watch=off
if [ "${LIVE_DENSITY_WATCH:-0}" = "1" ]; then watch=on; fi
"$BIN/podscope-coordinator" --insecure --http 127.0.0.1:0 --grpc 127.0.0.1:0 \
  --data-dir "$RUN/store" >"$RUN/coordinator.log" 2>&1 &
COORDINATOR=$!
PIDS+=("$COORDINATOR")
wait_log "$RUN/coordinator.log" 'listening on http://'
HTTP="http://127.0.0.1:$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$RUN/coordinator.log" | grep -oE '[0-9]+$')"
GRPC="$(grep -oE 'agents on grpc://[0-9.]+:[0-9]+' "$RUN/coordinator.log" | sed 's#agents on grpc://##')"
AGENT_PIDS=()
for a in $(seq 0 $((AGENTS - 1))); do
  first=$((a * PER_AGENT))
  "$BIN/podscope-agent" --coordinator "$GRPC" --insecure --host "node-$a" --watch "$watch" \
    --simulate "ranks=$first-$((first + PER_AGENT - 1)),world=$WORLD,job=dense,seed=3,straggler=$STRAGGLER,profile=dense" \
    >"$RUN/agent-$a.log" 2>&1 &
  PIDS+=($!)
  AGENT_PIDS+=($!)
done
for a in $(seq 0 $((AGENTS - 1))); do wait_log "$RUN/agent-$a.log" 'connected to'; done
sleep 1  # the first clock-sync burst
echo "== $AGENTS agents x $PER_AGENT dense ranks, a ${WINDOW} s window, straggler $STRAGGLER"
idle=()
for pid in "${AGENT_PIDS[@]}"; do idle+=("$(rss_mb "$pid")"); done
echo "agents' RSS before the capture: ${idle[*]} MB"
id=$(curl -sS -X POST -H 'Content-Type: application/json' \
  -d "{\"job\":\"dense\",\"duration_ms\":$((WINDOW * 1000)),\"delay_ms\":1000}" "$HTTP/v1/captures" |
  tee "$RUN/capture.json" | grep -oE '"id":"[^"]+"' | head -1 | cut -d'"' -f4) ||
  { echo "the capture was refused: $(cat "$RUN/capture.json")" >&2; exit 1; }
capture_perf=""
if [ -n "${LIVE_DENSITY_PERF_CAPTURE:-}" ]; then
  perf record -a -g -o "$LIVE_DENSITY_PERF_CAPTURE" >/dev/null 2>&1 &
  capture_perf=$!
fi
start=$(now)
# The window ends WINDOW s after the 1 s delay.
window_end=$(echo "$start + 1 + $WINDOW" | bc)
while :; do
  curl -sf "$HTTP/v1/captures/$id" >"$RUN/record.json"
  if [ -n "${LIVE_DENSITY_KEEP:-}" ]; then
    printf '%s %s\n' "$(echo "$(now) - $window_end" | bc)" \
      "$(grep -oE '"(events|chunks|state)":("[a-z]+"|[0-9]+)' "$RUN/record.json" | tr '\n' ' ')" \
      >>"$RUN/timeline.txt"
  fi
  state=$(grep -oE '"state":"[a-z]+"' "$RUN/record.json" | head -1 | cut -d'"' -f4)
  case "$state" in complete | partial | failed | cancelled) break ;; esac
  sleep 0.1
done
done_at=$(now)
if [ -n "$capture_perf" ]; then kill -INT "$capture_perf"; wait "$capture_perf" || true; fi
echo "capture $id $state $(echo "$done_at - $window_end" | bc) s after its window ended"
after=()
for pid in "${AGENT_PIDS[@]}"; do after+=("$(rss_mb "$pid")"); done
curl -sf "$HTTP/v1/captures/$id" | grep -oE '"events":[0-9]+' | head -1
perf_pid=""
if [ -n "${LIVE_DENSITY_PERF:-}" ]; then
  perf record -g -o "$LIVE_DENSITY_PERF" -p "$COORDINATOR" >/dev/null 2>&1 &
  perf_pid=$!
fi
for report in summary stragglers; do
  t0=$(now)
  curl -sf -o "$RUN/$report.txt" "$HTTP/v1/captures/$id/$report?format=table"
  echo "$report answered in $(echo "$(now) - $t0" | bc) s"
done
if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
grep -E '^rank [0-9]+ |^rank [0-9]+:|no straggler' "$RUN/stragglers.txt" || true
peaks=()
for pid in "${AGENT_PIDS[@]}"; do peaks+=("$(peak_mb "$pid")"); done
echo "agents' peak RSS: ${peaks[*]} MB; RSS after the upload: ${after[*]} MB; now: $(for pid in "${AGENT_PIDS[@]}"; do printf '%s ' "$(rss_mb "$pid")"; done)MB"
echo "coordinator's peak RSS: $(peak_mb "$COORDINATOR") MB"
