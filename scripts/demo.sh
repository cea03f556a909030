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

podscope_log "done"
echo "Merged traces (one process per rank, launch->kernel arrows):"
for job in trace_filter dlrm_8rank; do
  echo "  $OUT_DIR/$job.merged.json.gz"
done
echo "Open one at https://ui.perfetto.dev (Open trace file) or in chrome://tracing."
