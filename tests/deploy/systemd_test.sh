#!/usr/bin/env bash
# The bare-metal deployment, as docs/deploy.md tells an operator to do it, in a temporary root:
#   systemd_test.sh units   BUILD_DIR SOURCE_DIR   install, `systemd-analyze verify` both units (no
#                                                  warning either), `systemd-analyze security` under
#                                                  the exposure levels docs/deploy.md gives
#   systemd_test.sh capture BUILD_DIR SOURCE_DIR   install, make certificates and a token, put the
#                                                  example configs in place, start both daemons with
#                                                  their units' own ExecStart lines (rebased into the
#                                                  root: this machine has no systemd as PID 1), and
#                                                  take a capture from a simulated node end to end
set -euo pipefail
MODE="${1:?units|capture}"
BUILD="$(cd "${2:?build dir}" && pwd)"
SOURCE="$(cd "${3:?source dir}" && pwd)"

# The highest exposure `systemd-analyze security` may report (0 best, 10 worst); docs/deploy.md
# gives the levels measured.
MAX_EXPOSURE_COORDINATOR=1.5
MAX_EXPOSURE_AGENT=2.0

fail() { echo "FAIL: $*" >&2; exit 1; }
# A short root: the agent's socket path lives in it and must fit in sun_path.
ROOT="$(mktemp -d /tmp/psdeploy.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$ROOT"
}
trap cleanup EXIT

# 1. Install, as a package would (docs/deploy.md: `cmake --install build --prefix /usr`).
DESTDIR="$ROOT" cmake --install "$BUILD" --prefix /usr --strip >/dev/null
for f in usr/bin/podscope usr/bin/podscope-coordinator usr/bin/podscope-agent \
         usr/lib/systemd/system/podscope-coordinator.service usr/lib/systemd/system/podscope-agent.service \
         usr/lib/sysusers.d/podscope.conf usr/share/podscope/examples/coordinator.json \
         usr/share/podscope/examples/agent.json; do
  [ -e "$ROOT/$f" ] || fail "cmake --install did not install /$f"
done

if [ "$MODE" = units ]; then
  command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (Debian package systemd): cannot check the units"
  # verify resolves the units' dependencies (network-online.target, multi-user.target) in the root.
  mkdir -p "$ROOT/usr/lib/systemd"
  for d in /usr/lib/systemd/system /lib/systemd/system; do
    if [ -d "$d" ]; then cp -a "$d/." "$ROOT/usr/lib/systemd/system/"; break; fi
  done
  UNITS=(/usr/lib/systemd/system/podscope-coordinator.service /usr/lib/systemd/system/podscope-agent.service)
  out="$(systemd-analyze verify --root="$ROOT" "${UNITS[@]}" 2>&1)" || fail "systemd-analyze verify: $out"
  # verify only warns about an unknown or misspelt directive: any output at all is a failure.
  [ -z "$out" ] || fail "systemd-analyze verify printed: $out"
  echo "systemd-analyze verify: both units pass, no warnings"
  for unit in coordinator agent; do
    max="MAX_EXPOSURE_${unit^^}"
    report="$(systemd-analyze security --offline=yes --root="$ROOT" --threshold="${!max//./}" \
      "/usr/lib/systemd/system/podscope-$unit.service" 2>&1)" || true
    level="$(sed -n 's/.*Overall exposure level for podscope-'"$unit"'.service: \([0-9.]*\).*/\1/p' <<<"$report")"
    [ -n "$level" ] || fail "systemd-analyze security gave no exposure level for podscope-$unit: $report"
    awk -v l="$level" -v m="${!max}" 'BEGIN { exit !(l <= m) }' \
      || fail "podscope-$unit.service exposure $level is above $max=${!max}: $report"
    echo "podscope-$unit.service: exposure $level (at most ${!max})"
  done
  # A unit that loses its hardening must fail here: drop one directive and expect a higher level.
  sed -i '/^ProtectSystem=/d;/^SystemCallFilter=/d;/^CapabilityBoundingSet=/d' \
    "$ROOT/usr/lib/systemd/system/podscope-coordinator.service"
  weaker="$(systemd-analyze security --offline=yes --root="$ROOT" \
    /usr/lib/systemd/system/podscope-coordinator.service 2>&1 | sed -n 's/.*Overall exposure level[^:]*: \([0-9.]*\).*/\1/p')"
  awk -v l="$weaker" -v m="$MAX_EXPOSURE_COORDINATOR" 'BEGIN { exit !(l > m) }' \
    || fail "without its hardening the coordinator's unit still scores $weaker: the check cannot fail"
  echo "the check fails a unit without its hardening ($weaker)"
  exit 0
fi

[ "$MODE" = capture ] || fail "unknown mode $MODE"
# 2. What docs/deploy.md has the operator do: certificates, a token, the example configs.
ETC="$ROOT/etc/podscope"
mkdir -p "$ETC/tls" "$ROOT/var/lib/podscope" "$ROOT/run/podscope"
"$SOURCE/scripts/dev-certs.sh" "$ETC/tls" --coordinator-name 127.0.0.1 --coordinator-name localhost \
  --agent gpu-node-1 >/dev/null
mv "$ETC/tls/agent-gpu-node-1.pem" "$ETC/tls/agent.pem"
mv "$ETC/tls/agent-gpu-node-1.key" "$ETC/tls/agent.key"
openssl rand -hex 32 >"$ROOT/token"
"$ROOT/usr/bin/podscope-coordinator" hash-token --role admin --name ops <"$ROOT/token" >"$ETC/tokens"
cp "$ROOT/usr/share/podscope/examples/coordinator.json" "$ROOT/usr/share/podscope/examples/agent.json" "$ETC/"
# Rebase every absolute path of the configs and units into the root, and listen on free ports.
rebase() { sed -e "s#/etc/podscope#$ETC#g" -e "s#/var/lib/podscope#$ROOT/var/lib/podscope#g" \
               -e "s#/run/podscope#$ROOT/run/podscope#g" -e "s#/usr/bin/#$ROOT/usr/bin/#g"; }
rebase <"$ETC/coordinator.json" | sed -e 's#"0.0.0.0:8443"#"127.0.0.1:0"#' -e 's#"0.0.0.0:50051"#"127.0.0.1:0"#' \
  >"$ETC/coordinator.json.new" && mv "$ETC/coordinator.json.new" "$ETC/coordinator.json"
"$ROOT/usr/bin/podscope-coordinator" --config "$ETC/coordinator.json" --check-config >/dev/null \
  || fail "the example coordinator.json does not pass --check-config"

exec_start() { sed -n 's/^ExecStart=//p' "$ROOT/usr/lib/systemd/system/podscope-$1.service" | rebase; }
read -r -a COORDINATOR <<<"$(exec_start coordinator)"
"${COORDINATOR[@]}" >"$ROOT/coordinator.log" 2>&1 &
PIDS+=($!)
wait_for_log() {  # FILE REGEX: prints the first group of the first matching line
  for _ in $(seq 1 300); do
    if m="$(grep -oE "$2" "$1" | head -1)" && [ -n "$m" ]; then sed -E "s#$2#\\1#" <<<"$m"; return 0; fi
    sleep 0.1
  done
  fail "no line matching '$2' in $1 within 30 s: $(tail -5 "$1")"
}
GRPC_PORT="$(wait_for_log "$ROOT/coordinator.log" 'agents on grpcs?://[0-9.]+:([0-9]+)')"
HTTP_PORT="$(wait_for_log "$ROOT/coordinator.log" 'listening on https://[0-9.]+:([0-9]+)')"

# The agent's example config names a remote coordinator; the operator points it at theirs. No GPU
# here, so this node serves 8 simulated ranks.
rebase <"$ETC/agent.json" | python3 -c '
import json, sys
config = json.load(sys.stdin)
config["coordinator"] = "127.0.0.1:'"$GRPC_PORT"'"
config["simulate"] = "ranks=0-7,world=8,job=bare-metal,seed=3"
json.dump(config, sys.stdout, indent=2)' >"$ETC/agent.json.new" && mv "$ETC/agent.json.new" "$ETC/agent.json"
read -r -a AGENT <<<"$(exec_start agent)"
"${AGENT[@]}" --check-config >/dev/null || fail "the example agent.json does not pass --check-config"
"${AGENT[@]}" >"$ROOT/agent.log" 2>&1 &
PIDS+=($!)
wait_for_log "$ROOT/agent.log" '(connected to)' >/dev/null
[ -S "$ROOT/run/podscope/agent.sock" ] || fail "the agent made no probe socket at /run/podscope/agent.sock"

PODSCOPE=("$ROOT/usr/bin/podscope" --server "https://127.0.0.1:$HTTP_PORT" --ca-cert "$ETC/tls/ca.pem"
          --token-file "$ROOT/token")
"${PODSCOPE[@]}" capture --job bare-metal --duration 1s --wait >"$ROOT/capture.txt" 2>&1 \
  || fail "the capture did not complete: $(cat "$ROOT/capture.txt") $(tail -5 "$ROOT/coordinator.log")"
ID="$(sed -n 's/^capture \([^:]*\): job bare-metal.*/\1/p' "$ROOT/capture.txt" | head -1)"
[ -n "$ID" ] || fail "no capture id in: $(cat "$ROOT/capture.txt")"
"${PODSCOPE[@]}" show "$ID" --format json >"$ROOT/capture.json"
python3 - "$ROOT/capture.json" <<'PY'
import json, sys
capture = json.load(open(sys.argv[1]))
assert capture["state"] == "complete", capture["state"]
workers = capture["workers"]
assert len(workers) == 8, len(workers)
assert all(w["events"] > 0 for w in workers), workers
print(f"capture {capture['id']}: complete, 8 workers, {capture['events']} events")
PY
