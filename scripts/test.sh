#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (ctest). In CI (CI=true) or with
# PODSCOPE_SANITIZE=1 the core test suites also run under AddressSanitizer + UBSan.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/build_env.sh"

podscope_install_deps
podscope_install_test_deps
podscope_build
podscope_log "running the test suite"
(cd "$PODSCOPE_BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" --timeout 600)

if [ "${CI:-}" = "true" ] || [ "${PODSCOPE_SANITIZE:-0}" = "1" ]; then
  podscope_log "running the core suites under ASan + UBSan"
  podscope_build_sanitized
  (cd "$PODSCOPE_ROOT/build-asan" && ctest --output-on-failure -j "$(nproc)" --timeout 600)
fi
