#!/usr/bin/env bash
# The GPU kit (tests/gpu/pack.sh) on this machine: packed, unpacked into an empty directory, and
# its coordinator, agent and probe started with nothing but the kit's libraries added to what the
# target provides (the C library's family, the C++ runtime, OpenSSL, zlib).
#
#   tests/gpu/kit_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD="$1"
SRC="$2"
WORK="$(mktemp -d /tmp/podscope-kit-test.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done >&2; exit 1; }

bash "$SRC/tests/gpu/pack.sh" "$BUILD" "$WORK/packed" >"$WORK/pack.log"
tar -C "$WORK/packed" -cf "$WORK/kit.tar" .
KIT="$WORK/unpacked"
mkdir "$KIT"
tar -C "$KIT" -xf "$WORK/kit.tar"
for f in bin/podscope-coordinator bin/podscope-agent bin/podscope lib/libpodscope_probe.so lib/podscope_step.py \
         tests/gpu/run.sh tests/gpu/probe_workload.cu tests/gpu/train_loop.py VERSION; do
  [ -e "$KIT/$f" ] || fail "the kit has no $f"
done

# Every library a binary loads resolves into the kit, or is one the target provides.
provided='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libutil|libresolv|libstdc\+\+|libgcc_s|libssl|libcrypto|libz)\.so'
for b in "$KIT"/bin/* "$KIT"/lib/libpodscope_probe.so; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [ "$path" != "not" ] || fail "$b: $name not found with the kit's libraries"
    [[ "$path" == "$KIT/lib/"* ]] && continue
    [[ "$name" =~ $provided ]] || fail "$b loads $name from $path, outside the kit"
  done < <(env -i LD_LIBRARY_PATH="$KIT/lib" ldd "$b")
done

# The daemons from the kit, in an environment with nothing else set. Started without a function
# or subshell around them: $! is then the daemon itself (env execs it), which cleanup kills.
CLEAN_ENV=(env -i PATH=/usr/bin:/bin HOME="$WORK" LD_LIBRARY_PATH="$KIT/lib")
"${CLEAN_ENV[@]}" "$KIT/bin/podscope-coordinator" --insecure --data-dir "$WORK/store" --http 127.0.0.1:0 \
  --grpc 127.0.0.1:0 >"$WORK/coordinator.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 300); do grep -q "agents on grpc" "$WORK/coordinator.log" && break; sleep 0.1; done
HTTP=$(grep -o "listening on http://[^ ]*" "$WORK/coordinator.log" | head -1 | sed 's#.*http://##')
GRPC=$(grep -o "agents on grpc://[^ ]*" "$WORK/coordinator.log" | head -1 | sed 's#.*grpc://##')
[ -n "$HTTP" ] && [ -n "$GRPC" ] || fail "the kit's coordinator did not start"
"${CLEAN_ENV[@]}" "$KIT/bin/podscope-agent" --insecure --coordinator "$GRPC" --agent-id kit-node \
  --probe-socket "$WORK/agent.sock" >"$WORK/agent.log" 2>&1 &
PIDS+=($!)
registered=0
for _ in $(seq 300); do
  if curl -sf "http://$HTTP/v1/workers" | grep -q '"kit-node"'; then registered=1; break; fi
  sleep 0.1
done
[ "$registered" = 1 ] || fail "the kit's agent did not reach its coordinator"
# The CLI from the kit talks to them.
"${CLEAN_ENV[@]}" "$KIT/bin/podscope" captures --server "http://$HTTP" >"$WORK/cli.log" 2>&1 ||
  fail "the kit's CLI could not list captures"
# The probe loads from the kit into a process that has none of podscope's libraries and no
# LD_LIBRARY_PATH: it needs only the C runtime.
env -i PATH=/usr/bin:/bin HOME="$WORK" python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" \
  "$KIT/lib/libpodscope_probe.so" >"$WORK/probe.log" 2>&1 || fail "the kit's probe did not load"
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  [[ "$path" == "$KIT/lib/"* || "$name" =~ $provided ]] ||
    fail "without LD_LIBRARY_PATH the probe loads $name from $path, outside the kit"
done < <(env -i ldd "$KIT/lib/libpodscope_probe.so")
# Nothing needs a newer C library or C++ runtime than the target's (Ubuntu 24.04: glibc 2.39,
# GCC 14's libstdc++: GLIBCXX_3.4.33, CXXABI_1.3.15).
newest() { objdump -T "$KIT"/bin/* "$KIT"/lib/*.so* 2>/dev/null | grep -o "$1[0-9.]*" | sort -uV | tail -1; }
version_le() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1)" = "$2" ]; }
version_le "$(newest GLIBC_2.)" GLIBC_2.39 || fail "the kit needs $(newest GLIBC_2.), newer than the target's glibc 2.39"
version_le "$(newest GLIBCXX_3.4.)" GLIBCXX_3.4.33 || fail "the kit needs $(newest GLIBCXX_3.4.), newer than the target's libstdc++"
version_le "$(newest CXXABI_1.3.)" CXXABI_1.3.15 || fail "the kit needs $(newest CXXABI_1.3.), newer than the target's libstdc++"
echo "PASS: $(cat "$WORK/pack.log")"
