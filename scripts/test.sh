#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (ctest). In CI (CI=true) or with
# PODSCOPE_SANITIZE=1 the presubmit checks run too, and the core test suites run again under
# AddressSanitizer + UBSan, and the daemon and threading suites under ThreadSanitizer in a clang
# build that treats every locking-annotation violation as an error.
#
# The plain suite runs twice as many tests at a time as there are cores: most of them wait on
# their daemons' real clocks (the cluster and UI tests count as two, see tests/CMakeLists.txt). With the checks, the sanitizer builds and clang-tidy run beside the
# suites at idle priority (SCHED_IDLE), one after another, taking only the CPU the tests leave:
# the ASan suite starts once its build is done, the TSan suite once its own is (clang-tidy may
# still be running beside it). The sanitized suites run one test per core: under the sanitizers
# the tests are CPU-bound. A background step's output is in its log (build-asan/build.log,
# build-tsan/build.log, build/tidy.log), and its tail is printed if it fails.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/build_env.sh"

checks=false
if [ "${CI:-}" = "true" ] || [ "${PODSCOPE_SANITIZE:-0}" = "1" ]; then
  checks=true
fi

podscope_install_deps
podscope_install_test_deps
if $checks; then
  # Format, include layers and banned calls need no build: they fail first.
  bash "$PODSCOPE_ROOT/scripts/presubmit.sh" format layers banned history
fi
podscope_build

if $checks; then
  podscope_background_start asan "$PODSCOPE_ROOT/build-asan/build.log" podscope_build_sanitized
  podscope_background_start tsan "$PODSCOPE_ROOT/build-tsan/build.log" podscope_build_tsan
  podscope_background_start tidy "$PODSCOPE_BUILD_DIR/tidy.log" \
    bash "$PODSCOPE_ROOT/scripts/presubmit.sh" tidy  # reads build/compile_commands.json
fi

podscope_log "running the test suite"
(cd "$PODSCOPE_BUILD_DIR" && ctest --output-on-failure -j "$((2 * $(nproc)))" --timeout 600)

if $checks; then
  podscope_background_wait asan
  podscope_log "running the core suites under ASan + UBSan"
  podscope_borrow_test_costs "$PODSCOPE_ROOT/build-asan"
  (cd "$PODSCOPE_ROOT/build-asan" && ctest --output-on-failure -j "$(nproc)" --timeout 600)
  podscope_background_wait tsan
  podscope_log "running the daemon and threading suites under ThreadSanitizer (clang, -Wthread-safety -Werror)"
  podscope_borrow_test_costs "$PODSCOPE_ROOT/build-tsan"
  (cd "$PODSCOPE_ROOT/build-tsan" && PODSCOPE_TEST_TIME_SCALE=4 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PODSCOPE_ROOT/tests/tsan/suppressions.txt" \
    ctest --output-on-failure -j "$(nproc)" --timeout 900 -L 'threads|daemons')
  podscope_background_wait tidy
fi
podscope_log "all tests passed"
