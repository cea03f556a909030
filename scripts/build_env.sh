# Sourced by scripts/test.sh and scripts/demo.sh: installs what is missing (Debian 12)
# and builds podscope into build/ with ccache. Idempotent: a second run installs
# nothing and rebuilds only what changed.

PODSCOPE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PODSCOPE_BUILD_DIR="${PODSCOPE_BUILD_DIR:-$PODSCOPE_ROOT/build}"

# Debian packages podscope builds against. Boost: headers (Asio, Beast) plus Boost.JSON,
# not libboost-all-dev, which drags in MPI and Python for nothing. OpenSSL: TLS for HTTPS, mutual
# TLS between agents and coordinator, and scripts/dev-certs.sh. debootstrap and unicode-data: the
# self-contained probe (an older Debian's root to link against, scripts/probe_build_root.sh; RE2's
# tables made again from Debian's Unicode data, cmake/Re2Tables.cmake).
PODSCOPE_DEBIAN_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config zlib1g-dev libzstd-dev
  libboost1.81-dev libboost-json1.81-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libre2-dev libsimdjson-dev libspdlog-dev libfmt-dev libcli11-dev libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev openssl
  debootstrap unicode-data
)

# The checks beside the build (scripts/test.sh installs these): clang for the ThreadSanitizer
# build and its -Wthread-safety analysis, its sanitizer runtimes, clang-format and clang-tidy for
# the presubmit. The demo needs none of them.
PODSCOPE_CHECK_PACKAGES=(clang libclang-rt-dev clang-format clang-tidy)

# What the test suite runs against, real and not mocked (scripts/test.sh installs these too):
# Prometheus and promtool, Alertmanager; systemd-analyze (the units in deploy/systemd); Go with
# Sprig, yaml.v3 and gojsonschema (the Helm chart's offline renderer, tests/deploy/helm);
# debootstrap, buildah, podman and runc (the container images, tests/deploy/image_test.sh).
PODSCOPE_TEST_PACKAGES=(prometheus prometheus-alertmanager systemd
  golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v3-dev golang-github-xeipuuv-gojsonschema-dev
  debootstrap buildah podman runc
  chromium chromium-driver fonts-dejavu-core)

# Each line says how long the script has run (bash's SECONDS), so a CI log shows where time went.
podscope_log() { printf '\033[1m==> [%d:%02d] %s\033[0m\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }

podscope_install_deps() {
  podscope_install_packages "${PODSCOPE_DEBIAN_PACKAGES[@]}"
}

podscope_install_test_deps() {
  podscope_install_packages "${PODSCOPE_CHECK_PACKAGES[@]}" "${PODSCOPE_TEST_PACKAGES[@]}"
}

# podscope_install_packages PKG...: installs those not installed yet.
podscope_install_packages() {
  local missing=()
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$pkg")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  podscope_log "installing ${#missing[@]} missing Debian packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

# podscope_build [extra cmake args...]: configure (once) and build everything.
podscope_build() {
  podscope_configure "$@"
  podscope_log "building ($(nproc) jobs)"
  cmake --build "$PODSCOPE_BUILD_DIR" -j "$(nproc)"
}

# podscope_build_product: what the demo and a deployment run, and nothing else: the CLI, the
# coordinator, the agent, and the probe library where CUDA's headers are (no tests, fuzzers or
# benchmarks). A later podscope_build reuses all of it.
podscope_build_product() {
  podscope_configure
  local targets=(podscope podscope-coordinator podscope-agent)
  if grep -q "libpodscope_probe.so" "$PODSCOPE_BUILD_DIR/build.ninja" 2>/dev/null; then
    targets+=(podscope_probe)
  fi
  podscope_log "building ${targets[*]} ($(nproc) jobs)"
  cmake --build "$PODSCOPE_BUILD_DIR" -j "$(nproc)" --target "${targets[@]}"
}

# podscope_configure [extra cmake args...]: configure build/ (once; later calls pass the args on).
podscope_configure() {
  local werror=OFF
  if [ "${CI:-}" = "true" ]; then
    werror=ON
  fi
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
  # Three build trees (build, build-asan, build-tsan) share the cache: 2 GB made them evict
  # each other.
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-6G}"
  # The older Debian whose C runtime the probe links against (made once per machine).
  # Without it (no root, no network) the build goes on, and the probe's portability tests say why.
  local build_root
  if ! build_root=$(bash "$PODSCOPE_ROOT/scripts/probe_build_root.sh"); then
    podscope_log "no older Debian root: the probe is linked against this machine's glibc"
    build_root=""
  fi
  if [ ! -f "$PODSCOPE_BUILD_DIR/build.ninja" ]; then
    podscope_log "configuring into $PODSCOPE_BUILD_DIR"
    cmake -S "$PODSCOPE_ROOT" -B "$PODSCOPE_BUILD_DIR" -G Ninja \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPODSCOPE_WERROR="$werror" \
      -DPODSCOPE_PROBE_SYSROOT="$build_root" "$@" >/dev/null
  else
    cmake "$PODSCOPE_BUILD_DIR" -DPODSCOPE_WERROR="$werror" -DPODSCOPE_PROBE_SYSROOT="$build_root" "$@" >/dev/null
  fi
}

# The probe's targets exist only where CMake found the CUDA toolkit (its headers).
podscope_probe_targets() {
  if grep -q "podscope_probe_load_test" "$1/build.ninja" 2>/dev/null; then
    echo "podscope_probe podscope_probe_tests podscope_probe_load_test podscope_fake_training podscope_probe_e2e_tests"
  fi
}

# podscope_build_sanitized: the asan preset's configuration (clang: at -O0 with the sanitizers
# it compiles this code about three times faster than gcc), test binaries only, in build-asan/,
# with line tables instead of full debug info (-g1: the reports' frames keep their functions,
# files and lines; 7-23% less compile time per file). The preset keeps full debug info for
# debugging by hand.
podscope_build_sanitized() {
  local dir="$PODSCOPE_ROOT/build-asan"
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
  podscope_forget_other_compiler "$dir" clang++
  if [ ! -f "$dir/build.ninja" ]; then
    CC=clang CXX=clang++ cmake -S "$PODSCOPE_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DPODSCOPE_SANITIZE=ON -DPODSCOPE_WERROR=ON -DPODSCOPE_BUILD_BENCHMARKS=OFF >/dev/null
  fi
  cmake --build "$dir" -j "$(nproc)" --target podscope podscope-coordinator podscope-agent \
    podscope_all_tests $(podscope_probe_targets "$dir")
}

# podscope_forget_other_compiler DIR COMPILER: a build tree CMake configured with another C++
# compiler (build-asan/ used gcc before) keeps it for good; its configuration is dropped so that
# the next configure picks COMPILER. Its objects are rebuilt (ccache has those it has seen).
podscope_forget_other_compiler() {
  local cache="$1/CMakeCache.txt" compiler
  [ -f "$cache" ] || return 0
  compiler=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$cache")
  if [ "${compiler##*/}" != "$2" ]; then
    podscope_log "$1 was configured with another compiler: configuring it again with $2"
    rm -rf "$cache" "$1/CMakeFiles" "$1/build.ninja"
  fi
}

# The tsan preset's configuration in build-tsan/: clang with ThreadSanitizer, the locking
# annotations checked as errors (-Wthread-safety -Werror), the daemons and the suites that
# exercise their threads (ctest labels "threads" and "daemons").
podscope_tsan_targets() {
  echo "podscope podscope-coordinator podscope-agent podscope_agent_tests podscope_storage_tests podscope_control_tests podscope_integration_tests podscope_cluster_tests"
}

podscope_build_tsan() {
  local dir="$PODSCOPE_ROOT/build-tsan"
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
  if [ ! -f "$dir/build.ninja" ]; then
    CC=clang CXX=clang++ cmake -S "$PODSCOPE_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DPODSCOPE_TSAN=ON -DPODSCOPE_WERROR=ON -DPODSCOPE_BUILD_BENCHMARKS=OFF >/dev/null
  fi
  cmake --build "$dir" -j "$(nproc)" --target $(podscope_tsan_targets)
}

# Background steps (scripts/test.sh): each runs after the one started before it, at idle priority
# (SCHED_IDLE: it gets a core only while nothing else wants it), with its output in a log, and
# leaves its exit status in $PODSCOPE_BG_DIR/NAME.rc. They are stopped if the script exits first.
PODSCOPE_BG_DIR=""
PODSCOPE_BG_LAST=""
declare -A PODSCOPE_BG_PID=() PODSCOPE_BG_LOG=()

# podscope_background_start NAME LOG COMMAND...: COMMAND may be a function of this file.
podscope_background_start() {
  local name=$1 log=$2
  shift 2
  if [ -z "$PODSCOPE_BG_DIR" ]; then
    PODSCOPE_BG_DIR=$(mktemp -d)
    trap podscope_background_stop EXIT
  fi
  mkdir -p "$(dirname "$log")"
  local after=$PODSCOPE_BG_LAST dir=$PODSCOPE_BG_DIR
  # Its own process group (job control on for this one start), so that stopping it reaches
  # every process it started, even those whose parent has gone.
  set -m
  (
    if [ -n "$after" ]; then
      while [ ! -f "$dir/$after.rc" ]; do sleep 2; done
    fi
    chrt --idle -p 0 "$BASHPID" >/dev/null 2>&1 || renice -n 19 -p "$BASHPID" >/dev/null
    rc=0
    "$@" >"$log" 2>&1 || rc=$?
    # Written whole, then renamed: a waiter never reads a half-written status.
    echo "$rc" >"$dir/$name.rc.tmp" && mv "$dir/$name.rc.tmp" "$dir/$name.rc"
  ) &
  PODSCOPE_BG_PID[$name]=$!
  set +m
  PODSCOPE_BG_LOG[$name]=$log
  PODSCOPE_BG_LAST=$name
  podscope_log "started in the background, at idle priority: $name (log: $log)"
}

# podscope_background_wait NAME: waits for that step (saying what it is doing once a minute) and
# fails with the end of its log if it failed.
podscope_background_wait() {
  local name=$1 rc_file="$PODSCOPE_BG_DIR/$1.rc" log=${PODSCOPE_BG_LOG[$1]} waited=0
  while [ ! -f "$rc_file" ] && kill -0 "${PODSCOPE_BG_PID[$name]}" 2>/dev/null; do
    if [ $((waited % 60)) -eq 0 ]; then
      podscope_log "waiting for $name: $(tail -n 1 "$log" 2>/dev/null | cut -c1-100)"
    fi
    sleep 2
    waited=$((waited + 2))
  done
  local rc
  rc=$(cat "$rc_file" 2>/dev/null || echo "none: the step was killed")
  if [ "$rc" != 0 ]; then
    podscope_log "$name failed (exit status $rc); the end of $log:"
    tail -n 80 "$log" >&2
    return 1
  fi
  podscope_log "$name done"
}

# A sanitized suite's first run starts its longest tests first, by the plain suite's times (ctest
# keeps them in Testing/Temporary/CTestCostData.txt; without them it runs tests in the order they
# were declared, and a long one declared last leaves a core idle at the end). Its own times
# replace these from its second run on.
podscope_borrow_test_costs() {
  local from="$PODSCOPE_BUILD_DIR/Testing/Temporary/CTestCostData.txt" to="$1/Testing/Temporary"
  if [ -f "$from" ] && [ ! -f "$to/CTestCostData.txt" ]; then
    mkdir -p "$to"
    # The plain suite passed: its list of failed tests (after "---") is empty.
    sed '/^---$/q' "$from" >"$to/CTestCostData.txt"
  fi
}

# Stops the steps that have not finished (a finished step's process group is gone, and its
# number may be another process's by now).
podscope_background_stop() {
  local name
  for name in "${!PODSCOPE_BG_PID[@]}"; do
    if [ ! -f "$PODSCOPE_BG_DIR/$name.rc" ]; then
      kill -TERM -- "-${PODSCOPE_BG_PID[$name]}" 2>/dev/null || true
    fi
  done
  [ -n "$PODSCOPE_BG_DIR" ] && rm -rf "$PODSCOPE_BG_DIR"
}
