#!/usr/bin/env bash
# Presubmit checks (run by scripts/test.sh in CI, or by hand before a commit):
#   format   clang-format leaves every C and C++ file as it is (.clang-format)
#   layers   common/ includes no other folder; sim/, storage/ and http/ include common/ only
#            (and themselves); analysis/ includes common/ only; cli/ includes no daemon folder;
#            the agent and the coordinator include neither each other nor cli/; the control
#            plane's folders include downward only; no loop of folders including each other
#   banned   no std::sto*, atoi/atol/atof or strto* outside common/parse_number.cc (use
#            common::ParseInt / ParseDouble); no std::mutex or std::condition_variable
#            (absl::Mutex with ABSL_GUARDED_BY); no sleep in tests outside tests/wait_for.h
#            unless the line says why it is not a timing assertion ("not a timing assertion")
#   history  code, tests and docs say what is true now: no "issue N", no document outside the
#            repository (a section sign cites only a standard, "RFC N §M"), no history ("used
#            to", "before the fix", "fixed since", "this sitting"), and dates (YYYY-MM-DD) only
#            in the rows of figures tables
#   tidy     clang-tidy's naming checks (.clang-tidy) over every source, from build/'s
#            compile_commands.json
# Usage: scripts/presubmit.sh [format|layers|banned|history|tidy]...   (all five by default)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

checks=("$@")
[ ${#checks[@]} -eq 0 ] && checks=(format layers banned history tidy)
failed=()

say() { printf '\033[1m==> presubmit: %s\033[0m\n' "$*" >&2; }

# Tracked files and new ones not yet added (what a commit would take), never ignored ones.
sources() { git ls-files --cached --others --exclude-standard -- '*.cc' '*.h' '*.c' ':!:*.pb.*'; }

check_format() {
  command -v clang-format >/dev/null || { echo "clang-format is not installed (Debian: clang-format)"; return 1; }
  local bad=()
  while IFS= read -r f; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done < <(sources)
  if [ ${#bad[@]} -gt 0 ]; then
    for f in "${bad[@]}"; do echo "not clang-formatted: $f (fix: clang-format -i $f)"; done
    return 1
  fi
}

# banned_rule PATTERN WHY [PATHSPEC...]: no line of those files matches PATTERN.
banned_rule() {
  local pattern="$1" why="$2"
  shift 2
  local hits
  hits=$(git grep --untracked -nE "$pattern" -- "$@" || true)
  if [ -n "$hits" ]; then
    echo "$hits" | sed "s|\$|   <- $why|"
    return 1
  fi
}

# layer_rule DIR PATTERN WHY: no file under DIR includes a header matching PATTERN.
layer_rule() { banned_rule "^#include \"($2)/" "$3" "$1"; }

check_layers() {
  local rc=0
  layer_rule common 'agent|analysis|cli|coordinator|http|storage|sim' "common/ is the bottom layer: it includes no other folder" || rc=1
  layer_rule sim 'agent|analysis|cli|coordinator|http|storage' "sim/ (the workload model) depends on common/ only" || rc=1
  layer_rule storage 'agent|analysis|cli|coordinator|http|sim' "storage/ depends on common/ only" || rc=1
  layer_rule http 'agent|analysis|cli|coordinator|storage|sim' \
    "http/ (server, client, routing) is shared by both daemons and the CLI: it depends on common/ only" || rc=1
  layer_rule analysis 'agent|coordinator|storage|sim|cli|http' \
    "the analysis engine and its renderers are pure: they include common/ only" || rc=1
  layer_rule cli 'agent|coordinator|storage' \
    "the podscope command links no daemon part: it reaches the coordinator over REST" || rc=1
  layer_rule coordinator 'agent|cli|sim' "the coordinator includes neither the agent, the CLI nor the workload model" || rc=1
  layer_rule agent 'coordinator|cli|analysis|storage' \
    "the agent includes neither the coordinator, the CLI, the analysis engine nor the store" || rc=1
  # The control plane, bottom up: agents/ (the registry), clock/, capture/, control/ (gRPC).
  layer_rule coordinator/agents 'coordinator/(clock|capture|control|api|watch|shards|ui)' \
    "the agent registry is the bottom of the control plane" || rc=1
  layer_rule coordinator/clock 'coordinator/(capture|control|api|watch|shards|ui)' \
    "clocks sit below captures and the gRPC service" || rc=1
  layer_rule coordinator/capture 'coordinator/(control|api|watch|shards|ui)' \
    "captures sit below the gRPC service and the REST API" || rc=1
  no_folder_cycles || rc=1
  return $rc
}

# No two folders include each other, directly or around a loop: the include graph between
# folders (a file's folder, two levels deep: coordinator/capture, common/kineto) sorts
# topologically. tsort names the folders of a loop. A folder and its subfolders count as one.
no_folder_cycles() {
  local edges loop
  edges=$(git grep --untracked -nE '^#include "[a-z_]+/' -- '*.cc' '*.h' ':!:tests/*' ':!:bench/*' |
    sed -E 's|^([^:]+):[0-9]+:#include "([^"]+)".*|\1 \2|' |
    while read -r from to; do
      from=$(dirname "$from" | cut -d/ -f1-2)
      to=$(dirname "$to" | cut -d/ -f1-2)
      # A folder and its own subfolders are one unit (agent/ wires the collectors of
      # agent/collectors/, which implement agent/collector.h).
      case "$from/" in "$to"/*) continue ;; esac
      case "$to/" in "$from"/*) continue ;; esac
      [ "$to" != "." ] && echo "$from $to"
    done | sort -u)
  loop=$(echo "$edges" | tsort 2>&1 >/dev/null || true)
  if [ -n "$loop" ]; then
    echo "folders include each other in a loop: $(echo "$loop" | sed -n 's/^tsort: \([a-z]\)/\1/p' | tr '\n' ' ')"
    return 1
  fi
}

check_banned() {
  local rc=0
  local code=('*.cc' '*.h' ':!:common/parse_number.cc' ':!:tests/tsan/*')
  banned_rule '(std::sto(i|l|ll|ul|ull|f|d|ld)\(|\b(atoi|atol|atoll|atof|strtol|strtoll|strtoul|strtoull|strtod|strtof|strtold)\()' \
    "parse numbers with common::ParseInt / common::ParseDouble (common/parse_number.h)" "${code[@]}" || rc=1
  banned_rule '(std::(mutex|recursive_mutex|shared_mutex|timed_mutex|condition_variable(_any)?)\b|std::(lock_guard|unique_lock|scoped_lock)<)' \
    "use absl::Mutex with ABSL_GUARDED_BY (the clang build checks the annotations)" "${code[@]}" || rc=1
  # A route says what it is by name: {.method = ..., .heavy = true, .access = ...}, never a row
  # of positional flags.
  banned_rule 'Add\(\{"[A-Z]+",' "name a route's fields (.method, .pattern, .handler, .heavy, .access)" \
    'agent/*.cc' 'coordinator/*.cc' 'http/*.cc' || rc=1
  # A sleep in a test is kept only where its statement (this line, or the one before or after
  # it) says why it is not a timing assertion.
  local hit file line
  while IFS= read -r hit; do
    file=${hit%%:*}
    line=${hit#*:}
    line=${line%%:*}
    if ! sed -n "$((line > 1 ? line - 1 : 1)),$((line + 2))p" "$file" | grep -q 'not a timing assertion'; then
      echo "$hit   <- wait on a condition (tests/wait_for.h) or advance a SimulatedTimeSource"
      rc=1
    fi
  done < <(git grep -nE '(sleep_for|usleep|nanosleep|SleepFor)\(' -- 'tests/*.cc' 'tests/*.h' ':!:tests/wait_for.h' \
             ':!:tests/integration/fake_training.cc' ':!:tests/agent/probe/probe_load_test.c' || true)
  return $rc
}

check_history() {
  local rc=0
  # Text a person reads: code, tests, scripts, docs, configs. Trace fixtures and generated
  # files hold dates that are data.
  local text=('*.cc' '*.h' '*.c' '*.js' '*.css' '*.html' '*.md' '*.sh' '*.py' '*.go' '*.yaml'
    '*.yml' '*.cmake' 'CMakeLists.txt' '*.proto' '*.service' ':!:*.pb.*' ':!:scripts/presubmit.sh')
  banned_rule '(\b[Ii]ssue #?[0-9]+|D[E]SIGN §|\b([Uu]sed to (be|show|say|take|run|have)|[Bb]efore the fix|[Ff]ixed since|[Tt]his sitting|[Ll]ast sitting|[Ee]arlier sitting))' \
    "say what is true now; history belongs in git (commit messages), not in the tree" "${text[@]}" || rc=1
  local hits
  # A section sign cites a document: a standard's ("RFC 9112 §7.1") is one anyone can read; any
  # other points at a document kept outside the repository.
  hits=$(git grep --untracked -nE '§ ?[0-9]' -- "${text[@]}" | grep -vE 'RFC [0-9]+ §' || true)
  if [ -n "$hits" ]; then
    echo "$hits" | sed 's|$|   <- cite a file in the repository, or a standard by name (RFC N §M)|'
    rc=1
  fi
  hits=$(git grep --untracked -nE '\b20[0-9]{2}-[0-9]{2}-[0-9]{2}\b' -- "${text[@]}" | grep -vE '^[^:]+:[0-9]+:\|' || true)
  if [ -n "$hits" ]; then
    echo "$hits" | sed 's|$|   <- a date belongs in a figures table row, beside the commit measured|'
    rc=1
  fi
  return $rc
}

check_tidy() {
  command -v clang-tidy >/dev/null || { echo "clang-tidy is not installed (Debian: clang-tidy)"; return 1; }
  local db="${PODSCOPE_BUILD_DIR:-build}/compile_commands.json"
  [ -f "$db" ] || { echo "$db is missing: build first (scripts/test.sh builds before the presubmit)"; return 1; }
  # The product's sources (and, through them, its headers); tests follow GoogleTest's names.
  # Only what compile_commands.json knows (the probe's CUDA sources need the toolkit). Files
  # compiled in unity batches (cmake/PodscopeUnity.cmake) are checked through their batch,
  # which includes them: clang-tidy parses the batch once and reports in each file it includes.
  local files unity
  unity="$(cd "$(dirname "$db")" && pwd)/unity"
  files=$(git ls-files -- 'agent/*.cc' 'analysis/*.cc' 'cli/*.cc' 'common/*.cc' 'coordinator/*.cc' 'http/*.cc' 'storage/*.cc' 'sim/*.cc' |
    while IFS= read -r f; do grep -q "\"file\": \"$PWD/$f\"" "$db" && echo "$f"; done
    grep -oE "\"file\": \"$unity/(agent|analysis|cli|common|coordinator|http|storage|sim)/[^\"]+\"" "$db" |
      sed -E 's/^"file": "(.*)"$/\1/' || true)
  # Only the naming checks: the rest of .clang-tidy is advice for editors, not a gate.
  local out
  out=$(echo "$files" | xargs -P "$(nproc)" -n 8 clang-tidy -p "$(dirname "$db")" --quiet \
    --checks='-*,readability-identifier-naming' --warnings-as-errors='*' \
    --header-filter='^'"$PWD"'/(agent|analysis|cli|common|coordinator|http|storage|sim)/' 2>/dev/null |
    grep -E '(error|warning):' | sort -u || true)
  if [ -n "$out" ]; then
    echo "$out"
    return 1
  fi
}

for c in "${checks[@]}"; do
  say "$c"
  if ! "check_$c"; then failed+=("$c"); fi
done
if [ ${#failed[@]} -gt 0 ]; then
  say "FAILED: ${failed[*]}"
  exit 1
fi
say "all passed (${checks[*]})"
