#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (ctest). In CI (CI=true) or with
# PODSCOPE_SANITIZE=1 the presubmit checks run first, and afterwards the core test suites run
# under AddressSanitizer + UBSan, and the daemon and threading suites under ThreadSanitizer in a
# clang build that treats every locking-annotation violation as an error.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/build_env.sh"

podscope_install_deps
podscope_install_test_deps
if [ "${CI:-}" = "true" ] || [ "${PODSCOPE_SANITIZE:-0}" = "1" ]; then
  # Format, include layers and banned calls need no build: they fail first.
  bash "$PODSCOPE_ROOT/scripts/presubmit.sh" format layers banned
fi
podscope_build
if [ "${CI:-}" = "true" ] || [ "${PODSCOPE_SANITIZE:-0}" = "1" ]; then
  bash "$PODSCOPE_ROOT/scripts/presubmit.sh" tidy  # reads build/compile_commands.json
fi
podscope_log "running the test suite"
(cd "$PODSCOPE_BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" --timeout 600)

if [ "${CI:-}" = "true" ] || [ "${PODSCOPE_SANITIZE:-0}" = "1" ]; then
  podscope_log "running the core suites under ASan + UBSan"
  podscope_build_sanitized
  (cd "$PODSCOPE_ROOT/build-asan" && ctest --output-on-failure -j "$(nproc)" --timeout 600)
  podscope_log "running the daemon and threading suites under ThreadSanitizer (clang, -Wthread-safety -Werror)"
  podscope_build_tsan
  (cd "$PODSCOPE_ROOT/build-tsan" && PODSCOPE_TEST_TIME_SCALE=4 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PODSCOPE_ROOT/tests/tsan/suppressions.txt" \
    ctest --output-on-failure -j "$(nproc)" --timeout 900 -L 'threads|daemons')
fi
