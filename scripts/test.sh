#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (ctest).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/build_env.sh"

podscope_install_deps
podscope_build
podscope_log "running the test suite"
cd "$PODSCOPE_BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" --timeout 600
