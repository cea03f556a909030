#!/usr/bin/env bash
# libpodscope_probe.so loaded in a userland that has none of Debian 12's libraries: inside the
# root of an older Debian (scripts/probe_build_root.sh makes it with debootstrap), a loader
# built against that root's C runtime dlopens the probe as CUDA and NCCL do and drives its entry
# points (probe_load_test.c). chroot, so that nothing of this machine's /usr can be reached.
#   foreign_root_test.sh LOADER PROBE ROOT
set -euo pipefail
loader="$1" probe="$2" root="$3"
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -n "$root" ] && [ -f "$root/.podscope-build-root" ] \
  || fail "no older Debian root at '$root': configure with -DPODSCOPE_PROBE_SYSROOT=\$(scripts/probe_build_root.sh) (scripts/build_env.sh does)"
[ "$(id -u)" -eq 0 ] || fail "chroot needs root (running as uid $(id -u))"
[ -x "$root/bin/sh" ] || fail "$root has no /bin/sh"
version=$(chroot "$root" /usr/bin/env -i /usr/bin/ldd --version) || fail "ldd --version failed in $root"
glibc="${version%%$'\n'*}"
case "$glibc" in *2.3[4-9]* | *2.[4-9]*) fail "$root is not an older userland: $glibc" ;; esac

work=$(mktemp -d "$root/tmp/podscope-foreign.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$loader" "$work/loader"
cp "$probe" "$work/libpodscope_probe.so"
inside="/tmp/$(basename "$work")"
# Debian 12 is absent in there: no libstdc++ 12, no protobuf 3.21, no Abseil, no libc 2.36.
for lib in libprotobuf.so.32 libabsl_base.so.20220623 libfmt.so.9; do
  if [ -n "$(find "$root/usr/lib" "$root/lib" -name "$lib*" 2>/dev/null | head -1)" ]; then
    fail "$root has Debian 12's $lib"
  fi
done

ldd_out=$(chroot "$root" /usr/bin/env -i /usr/bin/ldd "$inside/libpodscope_probe.so" 2>&1) \
  || fail "ldd in $root failed: $ldd_out"
if grep -q "not found" <<<"$ldd_out"; then fail "in $root the probe's libraries are not all there: $ldd_out"; fi
echo "ldd in $root ($glibc):"
echo "$ldd_out"
out=$(chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin "$inside/loader" "$inside/libpodscope_probe.so" 2>&1) \
  || fail "the probe did not load and initialise in $root: $out"
echo "$out"
grep -q "^ok: probe loaded" <<<"$out" || fail "the loader did not report success: $out"
echo "ok: the probe loads and initialises in $root ($glibc)"
