#!/usr/bin/env bash
# scripts/build-times.sh over a hand-written ninja log of two runs: only the last run counts, a
# command with two outputs counts once, every figure is the sum worked out by hand below, and
# bad input is refused with a reason.
#   build_times_test.sh SOURCE_DIR
set -euo pipefail
script="$1/scripts/build-times.sh"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$dir/b"
# Run 1 (two steps), then run 2, each in the order ninja finishes them (ends never go down
# within a run). Run 2: compiles 1.0 + 2.0 (product) + 2.0 (fuzz) + 0.5 (bench) + 30.0 (tests)
# = 35.5 s; links 1.2 (fuzz) + 2.0 (tests) = 3.2 s; protoc 2.0 s logged for both of its outputs.
{
  printf '# ninja log v5\n'
  printf '0\t5000\t1\tcommon/CMakeFiles/podscope_common.dir/capture.cc.o\ta\n'
  printf '100\t9000\t1\thttp/CMakeFiles/podscope_http.dir/http_server.cc.o\tb\n'
  printf '0\t1000\t1\tcommon/CMakeFiles/podscope_common.dir/capture.cc.o\ta\n'
  printf '0\t2000\t1\tgenerated/podscope/v1/trace.pb.cc\tc\n'
  printf '0\t2000\t1\tgenerated/podscope/v1/trace.pb.h\tc\n'
  printf '1500\t3500\t1\ttests/CMakeFiles/podscope_kineto_fuzz.dir/fuzz/kineto_importer_fuzz.cc.o\tf\n'
  printf '2000\t4000\t1\tcommon/CMakeFiles/podscope_proto.dir/__/generated/podscope/v1/trace.pb.cc.o\td\n'
  printf '4000\t4500\t1\tbench/CMakeFiles/podscope_chunk_bench.dir/chunk_codec_benchmark.cc.o\ti\n'
  printf '3500\t4700\t1\ttests/podscope_kineto_fuzz\tg\n'
  printf '1000\t31000\t1\ttests/CMakeFiles/podscope_api_tests.dir/http/http_server_test.cc.o\te\n'
  printf '31000\t33000\t1\ttests/podscope_api_tests\th\n'
} >"$dir/b/.ninja_log"

bash "$script" "$dir/b" --top 3 >"$dir/out" || fail "exit $? on a good log"
cat >"$dir/want" <<'WANT'
wall time of the last build: 33.0 s (5 compiles, 2 links, 1 other steps)
CPU time: compile 35.5 s, link 3.2 s, other 2.0 s

part      compile (s)   link (s)
product           3.0        0.0
tests            30.0        2.0
bench             0.5        0.0
fuzz              2.0        1.2

slowest translation units (s, target):
    30.0  tests/http/http_server_test.cc  (podscope_api_tests)
     2.0  generated/podscope/v1/trace.pb.cc  (podscope_proto)
     2.0  tests/fuzz/kineto_importer_fuzz.cc  (podscope_kineto_fuzz)

slowest links (s):
     2.0  tests/podscope_api_tests
     1.2  tests/podscope_kineto_fuzz
WANT
diff -u "$dir/want" "$dir/out" || fail "report differs from the hand-computed one"

# Runs told apart by when they began (each output's time, ns, less its end): a short run, then
# a longer one whose first step ends after the short run's last. Only the second counts; a step
# whose output was left as it was (its time from before the run) still belongs to it.
mkdir -p "$dir/runs"
{
  printf '# ninja log v5\n'
  printf '0\t3000\t1000003000000000\tcoordinator/CMakeFiles/podscope_api.dir/api/rest_api.cc.o\ta\n'
  printf '0\t8000\t1000100008000000\tcommon/CMakeFiles/podscope_common.dir/capture.cc.o\tb\n'
  printf '0\t9000\t999000000000000\tgenerated/podscope/v1/trace.pb.h\tc\n'
  printf '8000\t9000\t1000100009000000\ttests/podscope_api_tests\td\n'
} >"$dir/runs/.ninja_log"
bash "$script" "$dir/runs" >"$dir/runs.out" || fail "exit $? on a two-run log"
grep -qF "wall time of the last build: 9.0 s (1 compiles, 1 links, 1 other steps)" "$dir/runs.out" \
  || { cat "$dir/runs.out" >&2; fail "the longer second run was not told apart from the first"; }

# --help is asked for: on stdout, status 0.
bash "$script" --help >"$dir/help" || fail "--help exited $?"
grep -qF "scripts/build-times.sh [BUILD_DIR]" "$dir/help" || fail "--help printed no usage on stdout"

# Errors: no log, not a ninja log, a log with no finished step, a bad --top, two directories.
expect_error() {
  local want="$1"
  shift
  if bash "$script" "$@" >"$dir/err.out" 2>"$dir/err"; then fail "accepted: $*"; fi
  grep -qF -- "$want" "$dir/err" || { cat "$dir/err" >&2; fail "'$*' did not say: $want"; }
}
expect_error "no ninja log at" "$dir/missing"
mkdir -p "$dir/notlog" && echo "hello" >"$dir/notlog/.ninja_log"
expect_error "not a ninja log" "$dir/notlog"
mkdir -p "$dir/empty" && printf '# ninja log v5\n' >"$dir/empty/.ninja_log"
expect_error "holds no finished build step" "$dir/empty"
expect_error "--top takes a count" "$dir/b" --top 0
expect_error "--top takes a count" "$dir/b" --top '1;rm'
expect_error "--top takes a count" "$dir/b" --top
expect_error "one build directory" "$dir/b" "$dir/empty"
echo "build_times_test: passed"
