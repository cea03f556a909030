#!/usr/bin/env bash
# The container images (deploy/docker/), built as a release would be, from a Debian 12 base made
# here with debootstrap from Debian's packages (no registry is reached), with buildah:
#   image_test.sh BUILD_DIR SOURCE_DIR
# Then: the images run as user 65532, carry a HEALTHCHECK, start, and the coordinator's
# HEALTHCHECK passes against a running container.
# The debootstrap base is kept in BUILD_DIR/image-base between runs (it is the slow part).
set -euo pipefail
BUILD="$(cd "${1:?build dir}" && pwd)"
SOURCE="$(cd "${2:?source dir}" && pwd)"
PROJECT_VERSION="$(sed -n 's/^project(podscope VERSION \([0-9.]*\).*/\1/p' "$SOURCE/CMakeLists.txt")"
BASE_IMAGE=localhost/podscope-debootstrap:bookworm
fail() { echo "FAIL: $*" >&2; exit 1; }
MIRROR="$(bash "$SOURCE/scripts/debian_mirror.sh")" || fail "no Debian mirror for debootstrap"
for tool in buildah podman debootstrap runc; do
  command -v "$tool" >/dev/null || fail "$tool is missing: install Debian's buildah, podman, runc and debootstrap (scripts/test.sh does)"
done
# runc, not crun: crun refuses this kind of machine's hybrid cgroup hierarchy. Limits stated
# (podman's defaults are more than this machine lets a container set), and no systemd timer for
# the HEALTHCHECK (there is no systemd to run it; `podman healthcheck run` runs it below).
PODMAN=(podman --runtime runc)
RUN=("${PODMAN[@]}" run --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 --health-interval disable)
[ "$(id -u)" -eq 0 ] || fail "debootstrap and buildah's chroot isolation need root here (running as uid $(id -u))"

WORK="$(mktemp -d /tmp/psimage.XXXXXX)"
CONTAINER=""
cleanup() {
  [ -n "$CONTAINER" ] && podman --runtime runc rm -f "$CONTAINER" >/dev/null 2>&1 || true
  # The images built here are this run's; the debootstrap base is kept for the next.
  podman rmi -f localhost/podscope/coordinator:test localhost/podscope/agent:test >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# 1. The base: a minimal Debian 12 made with debootstrap, imported once.
if ! podman image exists "$BASE_IMAGE"; then
  mkdir -p "$BUILD/image-base"
  if [ ! -f "$BUILD/image-base/bookworm.tar" ]; then
    echo "debootstrap --variant=minbase bookworm from $MIRROR (once; about a minute)"
    rm -rf "$BUILD/image-base/rootfs"
    debootstrap --variant=minbase bookworm "$BUILD/image-base/rootfs" "$MIRROR" >"$BUILD/image-base/debootstrap.log" 2>&1 \
      || fail "debootstrap failed (the last lines of $BUILD/image-base/debootstrap.log): $(tail -3 "$BUILD/image-base/debootstrap.log")"
    rm -rf "$BUILD/image-base/rootfs/var/cache/apt/archives/"*.deb
    tar -C "$BUILD/image-base/rootfs" -cf "$BUILD/image-base/bookworm.tar" .
    rm -rf "$BUILD/image-base/rootfs"
  fi
  podman import "$BUILD/image-base/bookworm.tar" "$BASE_IMAGE" >/dev/null 2>&1 || fail "podman import of the debootstrap base failed"
fi

# 2. The context: what `cmake --install` lays out, as in a package.
DESTDIR="$WORK/context/image-root" cmake --install "$BUILD" --prefix /usr --strip >/dev/null
for component in coordinator agent; do
  echo "building podscope/$component with buildah"
  # Docker format: OCI image configs have no HEALTHCHECK.
  buildah bud --isolation chroot --layers=false --quiet --format docker \
    --build-arg BASE="$BASE_IMAGE" --build-arg BINARIES=prebuilt \
    -f "$SOURCE/deploy/docker/Dockerfile.$component" -t "localhost/podscope/$component:test" "$WORK/context" \
    >"$WORK/build-$component.log" 2>&1 || fail "buildah bud of Dockerfile.$component: $(tail -15 "$WORK/build-$component.log")"
  config="$(podman image inspect "localhost/podscope/$component:test" --format '{{.Config.User}}|{{json .Config.Healthcheck}}|{{json .Config.Entrypoint}}')"
  [[ "$config" == 65532:65532\|* ]] || fail "podscope/$component does not run as 65532:65532: $config"
  [[ "$config" == *'"/usr/bin/podscope","health"'* ]] || fail "podscope/$component has no HEALTHCHECK running podscope health: $config"
  version="$("${RUN[@]}" --rm --network none --no-healthcheck "localhost/podscope/$component:test" --version 2>"$WORK/run.log")" \
    || fail "podscope/$component does not start: $version $(cat "$WORK/run.log")"
  [[ "$version" == "podscope-$component $PROJECT_VERSION"* ]] || fail "podscope/$component --version: $version (CMakeLists.txt: $PROJECT_VERSION)"
  echo "podscope/$component: $(podman image inspect "localhost/podscope/$component:test" --format '{{.Size}}') bytes, user 65532, HEALTHCHECK, starts"
done
if [ -f "$WORK/context/image-root/usr/lib/podscope/libpodscope_probe.so" ]; then
  "${RUN[@]}" --rm --network none --no-healthcheck --entrypoint /usr/bin/test localhost/podscope/agent:test -s /usr/lib/podscope/libpodscope_probe.so \
    || fail "the agent image lacks the probe library"
  echo "podscope/agent carries libpodscope_probe.so"
  # What the chart's init container copies to the node must load in any training image.
  if grep -q '^PODSCOPE_PORTABLE_PROBE:BOOL=ON' "$BUILD/CMakeCache.txt"; then
    sh "$SOURCE/tests/agent/probe/check_portable.sh" "$WORK/context/image-root/usr/lib/podscope/libpodscope_probe.so" 2.28 \
      || fail "the agent image's probe is not self-contained"
    echo "podscope/agent's probe: $(stat -c %s "$WORK/context/image-root/usr/lib/podscope/libpodscope_probe.so") bytes, only the C runtime"
  fi
fi

# 3. The coordinator in a container, plaintext on loopback: its HEALTHCHECK passes.
# Two free ports outside the kernel's ephemeral range, which outgoing connections may take
# before the coordinator listens (as FreePort in tests/integration/daemon.cc picks them).
read -r PORT GRPC < <(python3 - <<'PY'
import random, socket
low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
candidates = list(range(10000, low)) + list(range(high + 1, 65536))
random.shuffle(candidates)
ports = []
for port in candidates:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    ports.append(port)
    if len(ports) == 2:
        break
print(*ports)
PY
)
[ -n "$GRPC" ] || fail "no two free loopback ports outside the ephemeral range"
CONTAINER="$("${RUN[@]}" -d --network host --env PODSCOPE_SERVER="http://127.0.0.1:$PORT" localhost/podscope/coordinator:test \
  --insecure --http "127.0.0.1:$PORT" --grpc "127.0.0.1:$GRPC" --data-dir /var/lib/podscope/store 2>"$WORK/run.log")"
for _ in $(seq 1 100); do
  if "${PODMAN[@]}" healthcheck run "$CONTAINER" >/dev/null 2>&1; then
    echo "the coordinator's container is healthy (podman healthcheck run)"
    exit 0
  fi
  sleep 0.2
done
fail "the coordinator's HEALTHCHECK never passed: $("${PODMAN[@]}" healthcheck run "$CONTAINER" 2>&1) $(podman logs "$CONTAINER" 2>&1 | tail -5)"
