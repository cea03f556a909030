#!/usr/bin/env bash
# Builds and runs the benchmarks that produce docs/measured-figures.md:
#  - Google Benchmark programs (medians of 7 runs): Kineto import, chunk encode/decode,
#    trace store write/read;
#  - end to end: `podscope analyze` (all reports, JSON out) of a simulated 32-rank job with
#    ~3 million events, from Kineto files, as one process: wall time and peak memory.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/build_env.sh"
podscope_install_deps
podscope_build
for bench in podscope_import_bench podscope_chunk_bench podscope_store_bench podscope_probe_bench; do
  [ -x "$PODSCOPE_BUILD_DIR/bench/$bench" ] || continue  # the probe's needs the CUDA toolkit
  podscope_log "$bench"
  "$PODSCOPE_BUILD_DIR/bench/$bench" --benchmark_min_time=0.5 --benchmark_repetitions=7 \
    --benchmark_report_aggregates_only=true | grep -E "median|^Benchmark|^---"
done

PODSCOPE="$PODSCOPE_BUILD_DIR/bin/podscope"
JOB_DIR="$(mktemp -d)"
trap 'rm -rf "$JOB_DIR"' EXIT
podscope_log "end to end: simulate 32 ranks x 152 steps, then analyze --report all"
"$PODSCOPE" simulate --ranks 32 --steps 152 --plain-json -o "$JOB_DIR/job"
echo "JSON on disk: $(du -sh "$JOB_DIR/job" | cut -f1)"
for run in 1 2 3; do
  /usr/bin/time -f "run $run: %e s wall, %M KB peak RSS" \
    "$PODSCOPE" analyze "$JOB_DIR/job" --format json --clocks aligned > "$JOB_DIR/out.json"
done
echo "report: $(wc -c < "$JOB_DIR/out.json") bytes of JSON"
podscope_log "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
