#!/usr/bin/env bash
# Offline analysis at a real rank's density: `podscope simulate --preset dense` writes RANKS ranks
# of STEPS steps (1,100 steps is 5.5 s of one real GPU, 1.66 M events a rank), then
# `podscope analyze` answers each REPORT from them. It prints, per report, the wall time, the
# peak RSS and the bytes of it per event, with the JSON's size on disk.
#   bench/offline_density.sh [RANKS] [STEPS] [REPORTS...]
#   bench/offline_density.sh 2 1100 stragglers all     (the default)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/build_env.sh"
RANKS="${1:-2}"
STEPS="${2:-1100}"
REPORTS=("${@:3}")
[ "${#REPORTS[@]}" -eq 0 ] && REPORTS=(stragglers all)
podscope_install_deps
podscope_build_product
BIN="$PODSCOPE_BUILD_DIR/bin"
RUN="$(mktemp -d)"
trap 'rm -rf "$RUN"' EXIT
"$BIN/podscope" simulate --preset dense --ranks "$RANKS" --steps "$STEPS" \
  --straggler "$((RANKS - 1)):1.1" -o "$RUN/traces" >"$RUN/simulate.txt"
EVENTS="$(grep -oE '\(([0-9]+) events\)' "$RUN/simulate.txt" | tr -dc 0-9)"
echo "$RANKS dense ranks x $STEPS steps: $EVENTS events, $(du -sh "$RUN/traces" | cut -f1) gzipped"
for report in "${REPORTS[@]}"; do
  /usr/bin/time -f "%e %M" -o "$RUN/time" "$BIN/podscope" analyze "$RUN/traces" \
    --report "$report" --format json >"$RUN/out.json" 2>"$RUN/err.txt"
  read -r seconds peak_kb <"$RUN/time"
  awk -v r="$report" -v s="$seconds" -v kb="$peak_kb" -v e="$EVENTS" 'BEGIN {
    printf "analyze --report %-10s %6.2f s  peak %5.0f MB  %4.0f bytes/event\n", r, s, kb / 1024,
           kb * 1024 / e }'
done
