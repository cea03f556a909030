#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (clang, ASan + UBSan) of every target in tests/fuzz/:
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default 60 s, all targets)
# Seeds come from the shared fixtures (written by the suite's driver build, build/); the corpus
# grows in build-fuzz/corpus/<target>, crashes land in build-fuzz/findings/<target>. Exits non-zero
# on any finding. The test suite runs the same targets briefly without libFuzzer.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/build_env.sh"

SECONDS_PER_TARGET="${1:-60}"
shift || true
ALL_TARGETS=(podscope_kineto_fuzz podscope_chunk_fuzz podscope_probe_frame_fuzz podscope_proc_fuzz
             podscope_step_pattern_fuzz podscope_http_fuzz podscope_config_fuzz)
if [ $# -gt 0 ]; then TARGETS=("$@"); else TARGETS=("${ALL_TARGETS[@]}"); fi
FIXTURES=("$PODSCOPE_ROOT/../shared/data/kineto/trace_filter/sampled_rank-0.json.gz"
          "$PODSCOPE_ROOT/../shared/data/kineto/dlrm_8rank/rank-3.json.gz")
FUZZ_DIR="$PODSCOPE_ROOT/build-fuzz"

podscope_install_deps
command -v clang++ >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang >/dev/null; }
dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed" ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-rt-14-dev >/dev/null
podscope_build >/dev/null  # the driver builds write the seed corpora
if [ ! -f "$FUZZ_DIR/build.ninja" ]; then
  podscope_log "configuring the libFuzzer build into $FUZZ_DIR"
  CC=clang CXX=clang++ cmake -S "$PODSCOPE_ROOT" -B "$FUZZ_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPODSCOPE_LIBFUZZER=ON -DPODSCOPE_BUILD_BENCHMARKS=OFF \
    -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" >/dev/null
fi
podscope_log "building the fuzz targets"
cmake --build "$FUZZ_DIR" -j "$(nproc)" --target "${TARGETS[@]}"

status=0
for target in "${TARGETS[@]}"; do
  corpus="$FUZZ_DIR/corpus/$target" findings="$FUZZ_DIR/findings/$target"
  mkdir -p "$corpus" "$findings"
  "$PODSCOPE_BUILD_DIR/tests/$target" --write-seeds "$corpus" "${FIXTURES[@]}" >/dev/null
  podscope_log "$target: ${SECONDS_PER_TARGET} s"
  if ! "$FUZZ_DIR/tests/$target" "$corpus" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=4096 \
       -max_len=262144 -artifact_prefix="$findings/" -print_final_stats=1 >"$FUZZ_DIR/$target.log" 2>&1; then
    status=1
    podscope_log "$target: FINDING (see $findings and $FUZZ_DIR/$target.log)"
  fi
  grep -E "^stat::number_of_executed_units|^#[0-9]+.*(DONE|cov:)" "$FUZZ_DIR/$target.log" | tail -2
done
exit $status
