#!/usr/bin/env bash
# Builds and runs the benchmarks that produce the README's figures (medians of 7 runs).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/build_env.sh"
podscope_install_deps
podscope_build
for bench in podscope_import_bench podscope_chunk_bench; do
  podscope_log "$bench"
  "$PODSCOPE_BUILD_DIR/bench/$bench" --benchmark_min_time=0.5 --benchmark_repetitions=7 \
    --benchmark_report_aggregates_only=true | grep -E "median|^Benchmark|^---"
done
podscope_log "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
