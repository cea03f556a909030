#!/usr/bin/env bash
# Packs what tests/gpu/run.sh needs on a GPU machine that reaches no package registry: the
# built daemons, the CLI and the probe, the shared libraries they load that such a machine
# lacks, and the GPU checks' own files.
#
#   bash tests/gpu/pack.sh [BUILD_DIR] [KIT_DIR]      # default: build/ and gpu-kit/
#
# The target (tests/gpu/README.md) has glibc 2.39, libstdc++, libgcc, OpenSSL 3 and zlib: those
# are left out; every other library the daemons and the CLI load (Abseil, protobuf, gRPC, ...)
# goes into KIT_DIR/lib, where run.sh points LD_LIBRARY_PATH for them (the probe needs none). KIT_DIR is made afresh; its size is printed
# against the device tool's 64 MiB limit on what it carries.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
KIT="${2:-$ROOT/gpu-kit}"
LIMIT_BYTES=$((64 << 20))

binaries=("$BUILD/bin/podscope-coordinator" "$BUILD/bin/podscope-agent"
          "$BUILD/bin/podscope" "$BUILD/lib/libpodscope_probe.so")
for b in "${binaries[@]}"; do
  [ -f "$b" ] || { echo "pack: no $b: build first (the README's command, with the CUDA toolkit for the probe)" >&2; exit 1; }
done

# What the target provides: the C library's family, the C++ runtime, OpenSSL and zlib.
provided() {
  case "$1" in
    linux-vdso.so.*|ld-linux*.so.*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*) return 0 ;;
    libutil.so.*|libresolv.so.*|libstdc++.so.*|libgcc_s.so.*|libssl.so.*|libcrypto.so.*|libz.so.*) return 0 ;;
  esac
  return 1
}

rm -rf "$KIT"
mkdir -p "$KIT/bin" "$KIT/lib" "$KIT/tests/gpu"
cp "$BUILD/bin/podscope-coordinator" "$BUILD/bin/podscope-agent" "$BUILD/bin/podscope" "$KIT/bin/"
cp "$BUILD/lib/libpodscope_probe.so" "$ROOT/agent/probe/python/podscope_step.py" "$KIT/lib/"
declare -A copied=()
for b in "${binaries[@]}"; do
  # "libfoo.so.1 => /usr/lib/x86_64-linux-gnu/libfoo.so.1 (0x...)"; a library ldd cannot find
  # would fail on the target too.
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    provided "$name" && continue
    if [ "$path" = "not" ]; then echo "pack: $b needs $name, which is not found here" >&2; exit 1; fi
    [ -n "${copied[$name]:-}" ] && continue
    cp -L "$path" "$KIT/lib/$name"
    copied[$name]=1
  done < <(ldd "$b")
done
cp "$ROOT/tests/gpu/run.sh" "$ROOT/tests/gpu/probe_workload.cu" "$ROOT/tests/gpu/train_loop.py" \
   "$ROOT/tests/gpu/README.md" "$KIT/tests/gpu/"
strip --strip-unneeded "$KIT"/bin/* "$KIT"/lib/*.so* 2>/dev/null || true
printf '%s\n' "built from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" >"$KIT/VERSION"

bytes=$(du -sb "$KIT" | cut -f1)
echo "kit: $KIT, ${#copied[@]} libraries, $((bytes >> 20)) MiB (the device tool carries at most 64 MiB)"
if [ "$bytes" -gt "$LIMIT_BYTES" ]; then
  echo "pack: the kit is over 64 MiB: carry it as a tar.xz (tar -C $KIT -cJf gpu-kit.tar.xz .)" >&2
fi
