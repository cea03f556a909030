#!/usr/bin/env bash
# Makes, once per machine, the root of an older Debian (11, bullseye: glibc 2.31) whose C runtime
# libpodscope_probe.so is linked against, and prints its path. Linked there, the probe asks
# nothing of glibc that an older one lacks; agent/probe/glibc_compat.cc covers the few symbols
# of 2.29-2.36 that Debian 12's C++ runtime and libgcc reach for, so it holds to glibc 2.28
# (RHEL 8, manylinux_2_28). tests/agent/probe/foreign_root_test.sh loads the probe inside it.
#
# Why bullseye: it is the oldest Debian that Debian's mirrors still serve (buster, glibc 2.28,
# went to Debian's archive of old releases), and debootstrap checks what it fetches against
# Debian's keys. It is fetched from the mirror apt uses here (scripts/debian_mirror.sh).
#
#   probe_build_root.sh [DIR]   (default ${XDG_CACHE_HOME:-$HOME/.cache}/podscope/roots/bullseye)
set -euo pipefail
ROOT="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/podscope/roots/bullseye}"
fail() { echo "probe_build_root.sh: $*" >&2; exit 1; }

if [ -f "$ROOT/.podscope-build-root" ]; then
  echo "$ROOT"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || fail "debootstrap needs root to make $ROOT (running as uid $(id -u))"
command -v debootstrap >/dev/null || fail "debootstrap is missing: install Debian's debootstrap (scripts/build_env.sh does)"
mkdir -p "$(dirname "$ROOT")"
# One maker at a time (two builds configuring at once); the second finds the root made.
exec 9>"$ROOT.lock"
flock 9
if [ -f "$ROOT/.podscope-build-root" ]; then
  echo "$ROOT"
  exit 0
fi
# Only a root still to be made needs the mirror.
MIRROR="$(bash "$(dirname "${BASH_SOURCE[0]}")/debian_mirror.sh")"
partial="$ROOT.partial"
rm -rf "$partial"
echo "probe_build_root.sh: debootstrap bullseye (minbase with libc6-dev) into $ROOT, once; about a minute" >&2
debootstrap --variant=minbase --merged-usr --include=libc6-dev bullseye "$partial" "$MIRROR" >"$partial.log" 2>&1 \
  || fail "debootstrap failed (the last lines of $partial.log): $(tail -3 "$partial.log")"
# The linker reads this tree from outside it (--sysroot): links to absolute paths, such as
# lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/ld-2.31.so, would reach this machine's
# own libraries, so they are made relative.
while IFS= read -r link; do
  ln -sfr "$partial$(readlink "$link")" "$link"
done < <(find "$partial/usr/lib" "$partial/usr/lib64" -type l -lname '/*')
touch "$partial/.podscope-build-root"
rm -f "$partial.log"
mv "$partial" "$ROOT"
echo "$ROOT"
