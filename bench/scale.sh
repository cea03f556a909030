#!/usr/bin/env bash
# The scale benchmark: one podscope-coordinator and AGENTS simulated agents, hosted
# by PROCS swarm processes (several agents per process; spreading them over processes keeps
# one process's gRPC polling from serialising every agent's network I/O), then one capture of
# every worker: fan-out, start skew, clock-alignment error against the injected truth,
# coordinator CPU and memory idle and during the capture.
#   bench/scale.sh [AGENTS=1024] [PROCS=16] [extra podscope_agent_swarm flags, e.g. --jitter-ms 1]
# SCALE_KEEP_LOGS=DIR keeps the coordinator's and the swarm processes' logs there;
# SCALE_COORDINATOR_CONFIG=FILE starts the coordinator with that config.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/build_env.sh"
AGENTS="${1:-1024}"
PROCS="${2:-16}"
shift $(( $# > 2 ? 2 : $# ))
podscope_install_deps
podscope_build
BIN="$PODSCOPE_BUILD_DIR"
RUN="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ -n "${SCALE_KEEP_LOGS:-}" ]; then mkdir -p "$SCALE_KEEP_LOGS" && cp "$RUN"/*.log "$SCALE_KEEP_LOGS"/; fi
  rm -rf "$RUN"
}
trap cleanup EXIT

# Every simulated agent connects from 127.0.0.1: lift the per-client gRPC connection bound
# (a config given in SCALE_COORDINATOR_CONFIG must do the same).
if [ -z "${SCALE_COORDINATOR_CONFIG:-}" ]; then
  SCALE_COORDINATOR_CONFIG="$RUN/coordinator.json"
  echo '{"agents": {"max_connections_per_client": 100000, "max_unauthenticated_per_client": 100000, "max_unauthenticated_connections": 100000}}' >"$SCALE_COORDINATOR_CONFIG"
fi
# --insecure: the swarm's thousands of agents share one process and one address; this measures the
# control plane, not TLS handshakes (the demo and the tests run with TLS on).
"$BIN/bin/podscope-coordinator" --insecure --http 127.0.0.1:0 --grpc 127.0.0.1:0 --data-dir "$RUN/store" \
  --config "$SCALE_COORDINATOR_CONFIG" >"$RUN/coordinator.log" 2>&1 &
COORDINATOR=$!
PIDS+=($COORDINATOR)
for i in $(seq 1 100); do grep -q 'listening on http' "$RUN/coordinator.log" && break; sleep 0.05; done
GRPC="127.0.0.1:$(grep -oE 'agents on grpc://[0-9.]+:[0-9]+' "$RUN/coordinator.log" | grep -oE '[0-9]+$')"
HTTP="http://127.0.0.1:$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$RUN/coordinator.log" | grep -oE '[0-9]+$')"

PER=$(( (AGENTS + PROCS - 1) / PROCS ))
for p in $(seq 0 $(( PROCS - 1 ))); do
  FIRST=$(( p * PER ))
  COUNT=$(( AGENTS - FIRST < PER ? AGENTS - FIRST : PER ))
  [ "$COUNT" -le 0 ] && break
  "$BIN/bench/podscope_agent_swarm" --grpc "$GRPC" --server "$HTTP" --serve-only --first-agent "$FIRST" \
    --agents "$COUNT" --total-agents "$AGENTS" "$@" >"$RUN/swarm-$p.log" 2>&1 &
  PIDS+=($!)
done
podscope_log "$AGENTS agents in $PROCS processes against one coordinator ($(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
"$BIN/bench/podscope_agent_swarm" --grpc "$GRPC" --server "$HTTP" --coordinator-pid "$COORDINATOR" \
  --agents 0 --total-agents "$AGENTS" "$@"
