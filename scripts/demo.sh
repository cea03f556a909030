#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs podscope on the shared
# multi-rank PyTorch profiler traces: what is in them, then one merged Perfetto trace.
# (Later milestones turn this into a simulated multi-node cluster captured end to end.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/build_env.sh"

DATA_DIR="${PODSCOPE_SHARED_DATA:-$PODSCOPE_ROOT/../shared/data}"
OUT_DIR="${PODSCOPE_DEMO_OUT:-$PODSCOPE_ROOT/out}"
podscope_install_deps
podscope_build
PODSCOPE="$PODSCOPE_BUILD_DIR/coordinator/podscope"

if [ ! -d "$DATA_DIR/kineto" ]; then
  echo "demo: no fixtures at $DATA_DIR/kineto (set PODSCOPE_SHARED_DATA)" >&2
  exit 1
fi
mkdir -p "$OUT_DIR"

for job in trace_filter dlrm_8rank; do
  podscope_log "podscope inspect $job"
  "$PODSCOPE" inspect "$DATA_DIR/kineto/$job"
  echo
  podscope_log "podscope export $job"
  "$PODSCOPE" export "$DATA_DIR/kineto/$job" -o "$OUT_DIR/$job.merged.json.gz"
  echo
done

podscope_log "podscope analyze trace_filter --window hta (HTA-compatible temporal summary)"
"$PODSCOPE" analyze "$DATA_DIR/kineto/trace_filter" --window hta --report temporal
echo

podscope_log "a simulated 16-rank job with a 5% slower rank 5: stragglers, wait vs transfer"
"$PODSCOPE" simulate --ranks 16 --steps 6 --seed 7 --straggler 5:1.05 -o "$OUT_DIR/sim16"
"$PODSCOPE" analyze "$OUT_DIR/sim16" --report stragglers --report communication --clocks aligned
echo

podscope_log "done"
echo "Merged traces (one process per rank, launch->kernel arrows):"
for job in trace_filter dlrm_8rank; do
  echo "  $OUT_DIR/$job.merged.json.gz"
done
echo "Open one at https://ui.perfetto.dev (Open trace file) or in chrome://tracing."
