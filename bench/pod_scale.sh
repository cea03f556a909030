#!/usr/bin/env bash
# Pod scale at real event rates: for each rank count, a simulated job at the dense preset (a real
# rank's density: about 230 k events a second), imported through a real coordinator, then every
# report and every export read back from its store. Each phase runs against a coordinator started
# for it on the same store, so one phase's freed heap is not the next one's baseline; it prints
# seconds, nanoseconds an event (flat across sizes when time grows linearly with events), events a
# second and the coordinator's peak RSS (VmHWM); and the bytes an event the store keeps on disk
# once the coordinator has stopped (its tables, log and metadata: everything).
#   bench/pod_scale.sh [RANKS[:STEPS]...]  (default: 8 64; PODSCALE_STEPS=100 dense steps a rank)
#   bench/pod_scale.sh 8 64 1024:66        (the last about 100 M events)
# PODSCALE_KEEP=DIR keeps the simulated traces there (and reuses them on the next run).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/build_env.sh"
RANKS=("$@")
[ ${#RANKS[@]} -eq 0 ] && RANKS=(8 64)
STEPS="${PODSCALE_STEPS:-100}"
podscope_install_deps
podscope_build_product
BIN="$PODSCOPE_BUILD_DIR"
RUN="$(mktemp -d)"
TRACES="${PODSCALE_KEEP:-$RUN/traces}"
COORDINATOR=""
HTTP=""
EVENTS=0
cleanup() {
  if [ -n "$COORDINATOR" ]; then kill "$COORDINATOR" 2>/dev/null || true; fi
  rm -rf "$RUN"
}
trap cleanup EXIT

start_coordinator() {
  "$BIN/bin/podscope-coordinator" --insecure --http 127.0.0.1:0 --grpc 127.0.0.1:0 \
    --data-dir "$RUN/store" >"$RUN/coordinator.log" 2>&1 &
  COORDINATOR=$!
  for _ in $(seq 1 200); do grep -q 'listening on http' "$RUN/coordinator.log" && break; sleep 0.05; done
  HTTP="http://127.0.0.1:$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$RUN/coordinator.log" | grep -oE '[0-9]+$')"
}
stop_coordinator() {
  kill "$COORDINATOR"
  wait "$COORDINATOR" 2>/dev/null || true
  COORDINATOR=""
}
peak_mb() { awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$COORDINATOR/status"; }
now() { date +%s.%N; }
# measure COMMAND...: runs it against a fresh coordinator on the store (it reads $HTTP); leaves
# SECONDS_TAKEN and PEAK_MB.
measure() {
  start_coordinator
  local start end
  start=$(now)
  "$@" >/dev/null
  end=$(now)
  SECONDS_TAKEN=$(echo "$end - $start" | bc)
  PEAK_MB=$(peak_mb)
  stop_coordinator
}
report() {
  printf '  %-24s %8.2f s  %6.0f ns/event  %6.2f M events/s  peak RSS %6s MB\n' "$1" \
    "$SECONDS_TAKEN" "$(echo "scale=1; $SECONDS_TAKEN * 1000000000 / $EVENTS" | bc)" \
    "$(echo "scale=3; $EVENTS / $SECONDS_TAKEN / 1000000" | bc)" "$PEAK_MB"
}
# phase NAME COMMAND...: measure, then report.
phase() {
  local name="$1"
  shift
  measure "$@"
  report "$name"
}
get() { curl -sf -o /dev/null "$HTTP$1" || { echo "GET $1 failed" >&2; exit 1; }; }
import_job() { "$BIN/bin/podscope" import "$1" --job pod --capture pod --server "$HTTP"; }
# Every report once (a distinct `top` keeps them out of the other phase's cache).
all_reports() {
  for report in summary overview steps pod overlap communication stragglers allreduce kernels gpu \
    operators memory input temporal; do
    get "/v1/captures/pod/$report?top=20"
  done
}
by_worker_reports() {
  for report in kernels gpu operators memory temporal; do get "/v1/captures/pod/$report?top=21"; done
}

podscope_log "pod scale, dense preset ($(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
for spec in "${RANKS[@]}"; do
  n="${spec%%:*}"
  steps="$STEPS"
  [ "$spec" != "$n" ] && steps="${spec#*:}"
  dir="$TRACES/dense-$n-$steps"
  if [ ! -d "$dir" ]; then
    "$BIN/bin/podscope" simulate --preset dense --ranks "$n" --steps "$steps" --seed 1 \
      -o "$dir.partial" >/dev/null
    mv "$dir.partial" "$dir"
  fi
  rm -rf "$RUN/store"
  start_coordinator
  idle=$(peak_mb)
  stop_coordinator
  bytes=$(du -sb "$dir" | cut -f1)
  echo "$n ranks: $((bytes / 1048576)) MB of gzipped Kineto JSON; the coordinator idles at $idle MB"
  measure import_job "$dir"
  start_coordinator
  record=$(curl -sf "$HTTP/v1/captures/pod")
  stop_coordinator
  EVENTS=$(echo "$record" | grep -oE '"events":[0-9]+' | awk -F: 'NR == 1 {print $2}')
  stored=$(echo "$record" | grep -oE '"stored_bytes":[0-9]+' | awk -F: 'NR == 1 {print $2}')
  disk=$(du -sb "$RUN/store" | cut -f1)
  echo "  $EVENTS events ($((EVENTS / n)) a rank, $steps steps): the store holds $((disk / 1048576)) MB on disk, $(echo "scale=2; $disk / $EVENTS" | bc) bytes an event (chunks as encoded: $(echo "scale=1; $stored / $EVENTS" | bc))"
  report "import (podscope import)"
  phase "reports by worker (5)" by_worker_reports
  phase "every report (14)" all_reports
  phase "export json" get "/v1/captures/pod/trace"
  phase "export perfetto" get "/v1/captures/pod/trace?format=perfetto"
  all_events=$EVENTS
  EVENTS=$((all_events / n))  # one rank's
  phase "export kineto (1 rank)" get "/v1/captures/pod/trace?format=kineto&ranks=0"
  EVENTS=$all_events
done
