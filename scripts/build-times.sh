#!/usr/bin/env bash
# Where a build's time went, read from ninja's own log (BUILD_DIR/.ninja_log): the wall time of
# the last build, its compile and link CPU time, the total per part of the tree (product, tests,
# bench, fuzz), the slowest translation units and the slowest links.
#
#   scripts/build-times.sh [BUILD_DIR] [--top N] [--trace]
#
# BUILD_DIR defaults to build/. Only the last ninja run in the log is counted (a log keeps every
# run: an entry's output time less its end time since its run began is when that run began, the
# same for every entry of a run but those whose output the step left as it was), so build from a clean tree or an empty ccache to see the whole
# cost: a ccache hit shows as a few milliseconds. --top N lists N translation units (25 by
# default) and N links (10 by default); a unity batch is listed as unity/<folder>/<target>_N.cc,
# and that file under BUILD_DIR names the sources it compiles.
#
# --trace also sums clang's -ftime-trace files (*.json beside each object file): the headers that
# cost the most to parse, counted once per translation unit that includes them, and the templates
# that cost the most to instantiate. Make them with a clang build, for example
#   CC=clang CXX=clang++ cmake -S . -B build-trace -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
#     -DCMAKE_CXX_FLAGS=-ftime-trace && cmake --build build-trace
#   scripts/build-times.sh build-trace --trace
set -euo pipefail

# usage [STATUS]: the text above, on stdout when asked for (--help), on stderr after a mistake.
usage() {
  local status="${1:-2}"
  if [ "$status" = 0 ]; then
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
  else
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  fi
  exit "$status"
}

build_dir=""
top=25
trace=0
while [ $# -gt 0 ]; do
  case "$1" in
    --top)
      [ $# -ge 2 ] || { echo "build-times: --top takes a count" >&2; usage; }
      [[ "$2" =~ ^[1-9][0-9]{0,4}$ ]] || { echo "build-times: --top takes a count from 1 to 99999, not '$2'" >&2; exit 2; }
      top="$2"
      shift 2
      ;;
    --trace) trace=1; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "build-times: unknown option '$1'" >&2; usage ;;
    *)
      [ -z "$build_dir" ] || { echo "build-times: one build directory, not '$build_dir' and '$1'" >&2; exit 2; }
      build_dir="$1"
      shift
      ;;
  esac
done
build_dir="${build_dir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build}"
log="$build_dir/.ninja_log"
[ -f "$log" ] || { echo "build-times: no ninja log at $log (build with Ninja first)" >&2; exit 1; }
head -n1 "$log" | grep -q '^# ninja log v[5-9]' \
  || { echo "build-times: $log is not a ninja log of version 5 or later" >&2; exit 1; }

entries="${TMPDIR:-/tmp}/build-times.$$"
trap 'rm -f "$entries" "$entries.units" "$entries.links"' EXIT

# The last run's entries: output, start and end (ms since that run began), one line each.
# A command with several outputs (protoc's .pb.cc and .pb.h) is logged once per output with the
# same times; it is counted once, under its first output.
awk -F'\t' '
  /^#/ { next }
  NF < 5 { next }
  {
    # When this entry'"'"'s run began (ms): its output'"'"'s time (ns) less its end since then. A
    # run that began more than 2 s later is the next one; an earlier time is an output the step
    # left as it was (restat), part of this run. Without an output time, the end time decides:
    # a new run starts over at 0.
    began = ($3 + 0 > 0) ? $3 / 1e6 - $2 : -1
    if ((began >= 0 && began - run_began > 2000) || (began < 0 && $2 + 0 < prev_end)) {
      n = 0; split("", seen); run_began = began
    }
    prev_end = $2 + 0
    key = $1 "\t" $2 "\t" $5
    if (key in seen) next
    seen[key] = 1
    n++; out[n] = $4; start[n] = $1; end[n] = $2
  }
  END { for (i = 1; i <= n; i++) printf "%s\t%d\t%d\n", out[i], start[i], end[i] }
'  "$log" >"$entries"
: >"$entries.units"; : >"$entries.links"
[ -s "$entries" ] || { echo "build-times: $log holds no finished build step" >&2; exit 1; }

# part OUTPUT: which part of the tree a step belongs to. Object files of a target under tests/
# are named tests/CMakeFiles/<target>.dir/<source>.o; fuzz targets are tests' podscope_*_fuzz.
awk -F'\t' -v units="$entries.units" -v links="$entries.links" '
  function part(o) {
    if (o ~ /(^|\/)tests\/CMakeFiles\/podscope_[a-z_]*_fuzz\.dir\// || o ~ /(^|\/)tests\/podscope_[a-z_]*_fuzz$/) return "fuzz"
    if (o ~ /^tests\//) return "tests"
    if (o ~ /^bench\//) return "bench"
    return "product"
  }
  function kind(o) {
    if (o ~ /\.(o|obj)$/) return "compile"
    if (o ~ /\.(pb\.cc|pb\.h|cc)$/ || o ~ /\.(ninja|cmake)$/ || o ~ /CMakeFiles\//) return "other"
    return "link"
  }
  function secs(ms) { return sprintf("%.1f", ms / 1000) }
  {
    o = $1; s = $2 + 0; e = $3 + 0; d = e - s
    if (!any || s < wall_start) wall_start = s
    if (!any || e > wall_end) wall_end = e
    any = 1
    k = kind(o); p = part(o)
    cpu[k] += d; partcpu[p, k] += d; count[k]++
    if (k == "compile") {
      # tests/CMakeFiles/T.dir/agent/x.cc.o is tests/agent/x.cc; CMake writes a source outside
      # the folder of the target with ".." as "__" (the generated protobuf code).
      unit = o
      sub(/CMakeFiles\/[^\/]*\.dir\//, "", unit)
      sub(/\.o$/, "", unit)
      while (unit ~ /[^\/]+\/__\//) sub(/[^\/]+\/__\//, "", unit)
      target = o; sub(/\.dir\/.*$/, "", target); sub(/^.*CMakeFiles\//, "", target)
      printf "%d\t%s\t%s\n", d, unit, target > units
    } else if (k == "link") {
      printf "%d\t%s\n", d, o > links
    }
  }
  END {
    printf "wall time of the last build: %s s (%d compiles, %d links, %d other steps)\n",
           secs(wall_end - wall_start), count["compile"], count["link"], count["other"]
    printf "CPU time: compile %s s, link %s s, other %s s\n\n",
           secs(cpu["compile"]), secs(cpu["link"]), secs(cpu["other"])
    printf "%-8s %12s %10s\n", "part", "compile (s)", "link (s)"
    n = split("product tests bench fuzz", parts, " ")
    for (i = 1; i <= n; i++)
      printf "%-8s %12s %10s\n", parts[i], secs(partcpu[parts[i], "compile"]), secs(partcpu[parts[i], "link"])
  }
' "$entries"

echo
echo "slowest translation units (s, target):"
sort -t$'\t' -k1,1nr -k2,2 "$entries.units" | head -n "$top" \
  | awk -F'\t' '{ printf "%8.1f  %s  (%s)\n", $1 / 1000, $2, $3 }'
echo
echo "slowest links (s):"
sort -t$'\t' -k1,1nr -k2,2 "$entries.links" | head -n 10 | awk -F'\t' '{ printf "%8.1f  %s\n", $1 / 1000, $2 }'

if [ "$trace" = 1 ]; then
  command -v python3 >/dev/null || { echo "build-times: --trace needs python3" >&2; exit 1; }
  echo
  python3 - "$build_dir" "$top" <<'PY'
import json, os, sys
from collections import defaultdict

root, top = sys.argv[1], int(sys.argv[2])
headers = defaultdict(lambda: [0, 0])   # path -> [microseconds, units]
templates = defaultdict(lambda: [0, 0])  # name -> [microseconds, count]
frontend = backend = units = 0
for dirpath, _, files in os.walk(root):
    for name in files:
        if not name.endswith(".json") or ".o.json" not in name and not name.endswith(".cc.json"):
            continue
        try:
            with open(os.path.join(dirpath, name)) as f:
                events = json.load(f).get("traceEvents", [])
        except (OSError, ValueError):
            continue
        units += 1
        seen = set()
        for ev in events:
            if ev.get("ph") != "X":
                continue
            dur, kind = ev.get("dur", 0), ev.get("name", "")
            detail = ev.get("args", {}).get("detail", "")
            if kind == "Total Frontend":
                frontend += dur
            elif kind == "Total Backend":
                backend += dur
            elif kind == "Source" and detail:
                # Nested includes are inside their parent's span: only the outermost counts
                # towards the total, but each header is listed with its own inclusive time.
                headers[detail][0] += dur
                if detail not in seen:
                    headers[detail][1] += 1
                    seen.add(detail)
            elif kind in ("InstantiateClass", "InstantiateFunction") and detail:
                templates[detail][0] += dur
                templates[detail][1] += 1
if units == 0:
    sys.exit(f"build-times: no -ftime-trace files under {root} (build with clang and -ftime-trace)")
print(f"-ftime-trace: {units} translation units, frontend {frontend / 1e6:.1f} s, backend {backend / 1e6:.1f} s")
print(f"\nheaders by inclusive parse time (s, translation units including them):")
for path, (us, n) in sorted(headers.items(), key=lambda kv: -kv[1][0])[:top]:
    print(f"{us / 1e6:8.1f}  {n:4d}  {path}")
print(f"\ntemplates by instantiation time (s, instantiations):")
for name, (us, n) in sorted(templates.items(), key=lambda kv: -kv[1][0])[:top]:
    print(f"{us / 1e6:8.1f}  {n:5d}  {name[:150]}")
PY
fi
