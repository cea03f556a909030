#!/usr/bin/env bash
# The main job: installs what is missing, builds, then captures a simulated multi-node cluster
# end to end on this machine: one podscope-coordinator and 4 podscope-agent processes, each
# serving 8 simulated ranks of one 32-rank training job on its own skewed, drifting clock, with
# one straggler. A capture is triggered through the REST API (the CLI), the agents align their
# clocks, capture the same window and upload; the coordinator prints the capture's summary
# (stragglers with their step-time loss) and writes one merged Perfetto trace. Then the shared Kineto traces get the same
# analyses offline. It ends by printing the web UI's address and a token; run from a terminal, it
# keeps the cluster up until Enter so the UI can be looked at. Everything started here is
# stopped on exit.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/build_env.sh"

DATA_DIR="${PODSCOPE_SHARED_DATA:-$PODSCOPE_ROOT/../shared/data}"
OUT_DIR="${PODSCOPE_DEMO_OUT:-$PODSCOPE_ROOT/out}"
podscope_install_deps
podscope_build_product
BIN="$PODSCOPE_BUILD_DIR"

mkdir -p "$OUT_DIR"
RUN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/podscope-demo.XXXXXX")"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$RUN_DIR"
}
trap cleanup EXIT

# Waits for a regex in a log file; prints its first group.
wait_for_log() {
  local file="$1" pattern="$2" i
  for i in $(seq 1 200); do
    if grep -qE "$pattern" "$file" 2>/dev/null; then
      grep -oE "$pattern" "$file" | head -n1 | sed -E "s#$pattern#\\1#"
      return 0
    fi
    sleep 0.05
  done
  echo "demo: timed out waiting for \"$pattern\" in $file:" >&2
  cat "$file" >&2
  return 1
}

# As deployed: a CA, certificates for the coordinator and each agent (mutual TLS), HTTPS, and a
# bearer token for the CLI (stored hashed by the coordinator).
CERTS="$RUN_DIR/certs"
podscope_log "making a development CA, certificates and a token (scripts/dev-certs.sh, hash-token)"
"$PODSCOPE_ROOT/scripts/dev-certs.sh" "$CERTS" --agent node-0 --agent node-1 --agent node-2 --agent node-3
openssl rand -hex 32 >"$CERTS/token"
"$BIN/bin/podscope-coordinator" hash-token --role admin --name demo <"$CERTS/token" >"$CERTS/tokens"

podscope_log "starting podscope-coordinator (store in $RUN_DIR/store; HTTPS, agents over mutual TLS, tokens)"
"$BIN/bin/podscope-coordinator" --http 127.0.0.1:0 --grpc 127.0.0.1:0 --data-dir "$RUN_DIR/store" \
  --tls-cert "$CERTS/coordinator.pem" --tls-key "$CERTS/coordinator.key" --tls-ca "$CERTS/ca.pem" \
  --auth-tokens "$CERTS/tokens" >"$RUN_DIR/coordinator.log" 2>&1 &
PIDS+=($!)
GRPC_PORT="$(wait_for_log "$RUN_DIR/coordinator.log" 'agents on grpc://[0-9.]+:([0-9]+)')"
HTTP_PORT="$(wait_for_log "$RUN_DIR/coordinator.log" 'listening on https://[0-9.]+:([0-9]+)')"
SERVER="https://127.0.0.1:$HTTP_PORT"
# The CLI's credentials: the CA the coordinator's certificate chains to, and the token.
PODSCOPE=("$BIN/bin/podscope" --ca-cert "$CERTS/ca.pem" --token-file "$CERTS/token")

podscope_log "starting 4 agents x 8 simulated ranks (job demo, rank 13 computes 30% slower, clocks skewed by up to 50 ms)"
OFFSETS=(35 -50 12 -20)
DRIFTS=(40 -25 10 -60)
for a in 0 1 2 3; do
  "$BIN/bin/podscope-agent" --coordinator "127.0.0.1:$GRPC_PORT" --host "node-$a" \
    --tls-cert "$CERTS/agent-node-$a.pem" --tls-key "$CERTS/agent-node-$a.key" --tls-ca "$CERTS/ca.pem" \
    --simulate "ranks=$((a * 8))-$((a * 8 + 7)),world=32,job=demo,seed=7,straggler=13:1.3,clock-offset-ms=${OFFSETS[$a]},drift-ppm=${DRIFTS[$a]}" \
    >"$RUN_DIR/agent-$a.log" 2>&1 &
  PIDS+=($!)
done
for a in 0 1 2 3; do wait_for_log "$RUN_DIR/agent-$a.log" '(connected to)' >/dev/null; done
sleep 0.5  # the first clock-sync burst
"${PODSCOPE[@]}" --server "$SERVER" workers
echo

podscope_log "podscope --server $SERVER --ca-cert certs/ca.pem --token-file certs/token capture --job demo --duration 2s --wait"
# It follows the capture and prints its summary (one screen whatever the number of ranks).
"${PODSCOPE[@]}" --server "$SERVER" capture --job demo --duration 2s --wait --trace "$OUT_DIR/demo-capture.json.gz" \
  | tee "$RUN_DIR/capture.out"
CAPTURE_ID="$(grep -oE '^capture cap-[^:]+' "$RUN_DIR/capture.out" | head -n1 | cut -d' ' -f2)"
echo

podscope_log "podscope alerts --job demo (the coordinator watches every step, no capture needed)"
# The agents stream every rank's step summaries; the straggler alert fires within a few steps
# of the window filling, with its evidence and the capture it started.
for _ in $(seq 1 60); do
  ALERTS="$("${PODSCOPE[@]}" --server "$SERVER" alerts --job demo)"
  grep -q straggler <<<"$ALERTS" && break
  sleep 0.5
done
echo "$ALERTS"
echo

if [ -d "$DATA_DIR/kineto" ]; then
  podscope_log "offline: the shared 8-rank DLRM Kineto traces, inspected and merged"
  "$BIN/bin/podscope" inspect "$DATA_DIR/kineto/dlrm_8rank"
  "$BIN/bin/podscope" export "$DATA_DIR/kineto/dlrm_8rank" -o "$OUT_DIR/dlrm_8rank.merged.json.gz"
  echo
  podscope_log "offline: podscope analyze trace_filter --window hta (HTA-compatible temporal summary)"
  "$BIN/bin/podscope" analyze "$DATA_DIR/kineto/trace_filter" --window hta --report temporal
  echo
fi

echo "Merged traces (one process per rank, aligned clocks):"
echo "  $OUT_DIR/demo-capture.json.gz   (the live capture)"
[ -d "$DATA_DIR/kineto" ] && echo "  $OUT_DIR/dlrm_8rank.merged.json.gz"
echo "Open one at https://ui.perfetto.dev (Open trace file) or in chrome://tracing."
echo

# The web UI, served by the coordinator itself: the link opens the capture above (its pod view
# marks rank 13) and signs in with the demo's token (the part after # never reaches a server).
podscope_log "the web UI"
echo "  $SERVER/#/capture/$CAPTURE_ID&token=$(cat "$CERTS/token")"
echo "  token (role admin): $(cat "$CERTS/token")"
echo "  The certificate is signed by this demo's own CA ($CERTS/ca.pem): the browser warns once;"
echo "  accept it for 127.0.0.1. Watch and Alerts show the live job; the coordinator listens on"
echo "  127.0.0.1 only (from another machine: ssh -L $HTTP_PORT:127.0.0.1:$HTTP_PORT this-host)."
if [ -t 0 ] || [ "${PODSCOPE_DEMO_KEEP:-0}" = "1" ]; then
  read -r -p "The cluster keeps running for the UI; press Enter to stop it. " _ || true
fi
podscope_log "done; stopping the coordinator and the agents"
