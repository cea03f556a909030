#!/bin/sh
# libpodscope_probe.so is loaded into training processes whatever their image (NGC PyTorch,
# conda, RHEL 8 under Slurm), so it may need nothing beyond the C runtime, and no glibc symbol
# newer than the baseline.
#   check_portable.sh LIBRARY GLIBC_BASELINE     (e.g. 2.28)
set -eu
lib="$1"
baseline="$2"
fail() { echo "FAIL: $lib: $*" >&2; exit 1; }
for tool in readelf objdump ldd; do
  command -v "$tool" >/dev/null || fail "$tool is missing (Debian's binutils and libc-bin)"
done
[ -f "$lib" ] || fail "no such file"

# 1. What it names (DT_NEEDED) and what the loader resolves (ldd): the C runtime only.
c_runtime='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-x86-64\.so\.2)$'
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || fail "readelf shows no NEEDED entries (not a dynamic library?)"
others=$(printf '%s\n' "$needed" | grep -Ev "$c_runtime" || true)
[ -z "$others" ] || fail "needs more than the C runtime: $(echo $others)"
resolved=$(ldd "$lib" | awk '{print $1}' | sed 's|.*/||' | grep -v '^linux-vdso\.so\.1$')
others=$(printf '%s\n' "$resolved" | grep -Ev "$c_runtime" || true)
[ -z "$others" ] || fail "ldd resolves more than the C runtime: $(echo $others)"
if readelf -d "$lib" | grep -Eq '\((RPATH|RUNPATH)\)'; then
  fail "carries a library search path, which a self-contained library has no use for"
fi

# 2. Versions it asks of the dynamic symbols it imports: glibc's, none above the baseline, and
# none of the C++ runtime's or libgcc's (those are linked in). Every strong import is versioned
# (an unversioned one would bind to whatever the process has), and none is glibc's private ABI.
tags=$(readelf --dyn-syms -W "$lib" | awk '$7 == "UND" && $8 ~ /@/ { sub(/^[^@]*@+/, "", $8); sub(/ .*/, "", $8); print $8 }' | sort -u)
odd=$(printf '%s\n' "$tags" | grep -Ev '^GLIBC_[0-9]+(\.[0-9]+)*$' || true)
[ -z "$odd" ] || fail "imports symbols of versions other than glibc's numbered ones: $(echo $odd)"
# Weak ones too, but for the hooks every library has that stay null without their runtime:
# gprof's __gmon_start__ and transactional memory's _ITM_* and _ZGTt*.
unversioned=$(readelf --dyn-syms -W "$lib" | awk '$7 == "UND" && $8 != "" && $8 !~ /@/ && !($5 == "WEAK" && $8 ~ /^(__gmon_start__|_ITM_|_ZGTt)/) { print $8 }')
[ -z "$unversioned" ] || fail "imports symbols with no version, bound to whatever the process has: $(echo $unversioned)"
versions=$(objdump -T "$lib" | grep -o '[A-Z_]*_[0-9][0-9.]*' | grep -E '^(GLIBC|GLIBCXX|CXXABI|GCC)_' | sort -u)
cxx=$(printf '%s\n' "$versions" | grep -E '^(GLIBCXX|CXXABI|GCC)_' || true)
[ -z "$cxx" ] || fail "imports from the C++ runtime or libgcc: $(echo $cxx)"
newest=$(printf '%s\n' "$versions" | sed -n 's/^GLIBC_//p' | sort -V | tail -1)
[ -n "$newest" ] || fail "objdump -T shows no glibc symbol versions"
above=$(printf '%s\n' "$versions" | sed -n 's/^GLIBC_//p' | while read -r v; do
  [ "$(printf '%s\n%s\n' "$v" "$baseline" | sort -V | tail -1)" = "$baseline" ] || echo "$v"
done)
if [ -n "$above" ]; then
  objdump -T "$lib" | grep -E "GLIBC_($(echo $above | tr ' ' '|' | sed 's/\./\\./g'))[^0-9.]" >&2 || true
  fail "needs glibc newer than $baseline: GLIBC_$(echo $above | sed 's/ / GLIBC_/g')"
fi
echo "ok: $lib needs only the C runtime ($(echo $needed)), glibc $newest at most (baseline $baseline)"
