#!/usr/bin/env bash
# The probe on a real GPU. Not part of CI: run it by hand on a machine with an NVIDIA
# GPU, the CUDA toolkit (nvcc) and, for the second half, PyTorch with CUDA.
#
#   bash tests/gpu/run.sh            # both checks
#   GPU_CHECK=cuda bash tests/gpu/run.sh   # only the CUDA program
#   bash gpu-kit/tests/gpu/run.sh    # from a kit (tests/gpu/pack.sh): nothing built or installed
#
# From a checkout it builds podscope (the README's way); from a kit it takes the kit's binaries
# and libraries. It starts a coordinator and an agent serving probes on a private socket, and
# then:
#   1. runs tests/gpu/probe_workload.cu under the probe (CUDA_INJECTION64_PATH) and captures 3 s
#      of it: the kernels captured must equal the launches the program itself logged inside the
#      window (give or take the two launches that straddle its edges; kernels still running at
#      its end are not in it), with nothing lost and the
#      NVTX steps found;
#   2. runs tests/gpu/train_loop.py (DDP over NCCL, one rank per GPU, torchrun for several) in
#      interleaved rounds (ROUNDS=3 of ROUND_S=10 s): without the probe, with it loaded and
#      watching, and with PODSCOPE_WATCH=0, then during a 5 s capture; checks that kernels, steps
#      (and with several GPUs AllReduces, NCCL_PROFILER_PLUGIN) were captured with nothing lost
#      and that the watch saw steps, and reports the overhead of each round and its spread.
# Exit status 0 when every check holds. Figures go to stdout and $WORK/summary.txt.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [ -x "$ROOT/bin/podscope-coordinator" ]; then
  # A kit: the machine may reach no package registry, so nothing is installed or built. Its
  # libraries are for podscope's daemons (LD_LIBRARY_PATH); the probe needs only the C runtime,
  # so training processes get no library path that could shadow their own.
  COORDINATOR="$ROOT/bin/podscope-coordinator"
  AGENT="$ROOT/bin/podscope-agent"
  PROBE="$ROOT/lib/libpodscope_probe.so"
  KIT_LIBS="$ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "from the kit in $ROOT ($(cat "$ROOT/VERSION" 2>/dev/null))"
else
  source "$ROOT/scripts/build_env.sh"
  podscope_install_deps
  podscope_build
  COORDINATOR="$PODSCOPE_BUILD_DIR/bin/podscope-coordinator"
  AGENT="$PODSCOPE_BUILD_DIR/bin/podscope-agent"
  PROBE="$PODSCOPE_BUILD_DIR/lib/libpodscope_probe.so"
  KIT_LIBS="${LD_LIBRARY_PATH:-}"
fi
[ -f "$PROBE" ] || { echo "no $PROBE: was the CUDA toolkit found by CMake?"; exit 1; }
WORK="$(mktemp -d /tmp/podscope-gpu.XXXXXX)"
echo "work directory: $WORK"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
FAILED=0
check() {  # check NAME CONDITION-EXIT-STATUS MESSAGE
  if [ "$2" = 0 ]; then echo "PASS $1: $3"; else echo "FAIL $1: $3"; FAILED=1; fi | tee -a "$WORK/summary.txt"
}

# --- the daemons -----------------------------------------------------------------------------
# Loopback on a lent GPU machine, nothing else on it: plaintext (--insecure) keeps this script
# to what it measures, the probe.
env LD_LIBRARY_PATH="$KIT_LIBS" "$COORDINATOR" --insecure --data-dir "$WORK/store" --http 127.0.0.1:0 --grpc 127.0.0.1:0 \
  >"$WORK/coordinator.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q "listening on http" "$WORK/coordinator.log" && break; sleep 0.1; done
HTTP=$(grep -o "listening on http://[^ ]*" "$WORK/coordinator.log" | head -1 | sed 's#.*http://##')
GRPC=$(grep -o "agents on grpc://[^ ]*" "$WORK/coordinator.log" | head -1 | sed 's#.*grpc://##')
SOCKET="$WORK/run/agent.sock"
env LD_LIBRARY_PATH="$KIT_LIBS" "$AGENT" --insecure --coordinator "$GRPC" --agent-id gpu-node --probe-socket "$SOCKET" \
  >"$WORK/agent.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q "serving" "$WORK/agent.log" && break; sleep 0.1; done
echo "coordinator http://$HTTP, agent on $SOCKET"

api() { curl -sf "http://$HTTP$1" "${@:2}"; }
wait_worker() {  # wait_worker JOB
  for _ in $(seq 300); do
    api /v1/workers | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if any(w.get('job')=='$1' for w in d['workers']) else 1)" && return 0
    sleep 0.1
  done
  echo "no worker of job $1 registered; agent log:"; tail -20 "$WORK/agent.log"; return 1
}
capture() {  # capture JOB DURATION_MS -> prints the capture id once it has ended
  local id
  id=$(api /v1/captures -X POST -H 'Content-Type: application/json' -d "{\"job\":\"$1\",\"duration_ms\":$2}" |
       python3 -c "import json,sys; print(json.load(sys.stdin)['id'])")
  for _ in $(seq 600); do
    state=$(api "/v1/captures/$id" | python3 -c "import json,sys; print(json.load(sys.stdin)['state'])")
    case "$state" in complete|partial|failed|cancelled) break ;; esac
    sleep 0.1
  done
  echo "$id"
}
probe_env() {  # the two variables that load the probe, plus who this process is
  echo "CUDA_INJECTION64_PATH=$PROBE NCCL_PROFILER_PLUGIN=$PROBE NVTX_INJECTION64_PATH=$PROBE PODSCOPE_AGENT_SOCKET=$SOCKET RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 PODSCOPE_JOB=$1"
}

# --- 1. the CUDA program ------------------------------------------------------------------------
if [ "${GPU_CHECK:-all}" != "torch" ]; then
  if ! nvcc -O2 -o "$WORK/probe_workload" "$ROOT/tests/gpu/probe_workload.cu" >"$WORK/nvcc.log" 2>&1; then
    check cuda-build 1 "nvcc could not build probe_workload.cu: $(tail -1 "$WORK/nvcc.log")"
    GPU_CHECK_CUDA_SKIP=1
  fi
fi
if [ "${GPU_CHECK:-all}" != "torch" ] && [ -z "${GPU_CHECK_CUDA_SKIP:-}" ]; then
  env $(probe_env gpu-cuda) "$WORK/probe_workload" 12 "$WORK/launches.txt" >"$WORK/workload.log" 2>&1 &
  WORKLOAD=$!
  PIDS+=("$WORKLOAD")
  wait_worker gpu-cuda || true
  sleep 2
  ID=$(capture gpu-cuda 3000) || true
  wait "$WORKLOAD" || true
  api "/v1/captures/$ID" >"$WORK/cuda-capture.json" || true
  api "/v1/captures/$ID/trace" >"$WORK/cuda-trace.json" || true
  api "/v1/captures/$ID/steps" >"$WORK/cuda-steps.json" || true
  # A check's Python that fails (a missing file) is a failed check, not the end of the script.
  python3 - "$WORK" <<'PY' | tee -a "$WORK/summary.txt" || true
import json, sys
work = sys.argv[1]
cap = json.load(open(f"{work}/cuda-capture.json"))
w = cap["workers"][0]
start, stop = w["actual_start_ns"], w["actual_stop_ns"]
launches = [int(l) for l in open(f"{work}/launches.txt")]
expected = sum(1 for t in launches if start <= t <= stop)
# A window holds what ran inside it (docs/life-of-a-capture.md): a kernel launched just before the
# stop and still running then is left out as "kernels: after the window" (a few: those in flight),
# one queued before the start as "before the window". Only other drops are losses.
reasons = w.get("dropped_reasons", {})
edge = reasons.get("kernels: after the window", 0)
lost = w["dropped_events"] - sum(n for r, n in reasons.items() if "the window" in r or "no time" in r)
trace = json.load(open(f"{work}/cuda-trace.json"))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
captured = sum(1 for e in events if e.get("ph") == "X" and "podscope_workload_kernel" in e.get("name", ""))
steps = json.load(open(f"{work}/cuda-steps.json"))["workers"][0]
print(f"cuda: state {cap['state']}, window {(stop - start) / 1e9:.3f} s, kernels captured {captured}, "
      f"launched in window {expected} ({edge} still running at its end), dropped {w['dropped_events']} {reasons}, "
      f"steps {len(steps['steps'])} ({steps['step_source']})")
ok = cap["state"] == "complete" and abs(captured + edge - expected) <= 2 and edge <= 64 and expected > 1000 \
     and lost == 0 \
     and steps["step_source"] == "markers" and len(steps["steps"]) > 10
print("CUDA_CHECK", "ok" if ok else "failed")
PY
  # Under set -e a bare failing grep would end the script here: every check is reported.
  grep -q "CUDA_CHECK ok" "$WORK/summary.txt" && rc=0 || rc=1
  check cuda-kernels "$rc" "kernels vs the program's own launch count, NVTX steps, nothing lost"
fi

# --- 2. PyTorch ---------------------------------------------------------------------------------
if [ "${GPU_CHECK:-all}" != "cuda" ]; then
  LOOP="$ROOT/tests/gpu/train_loop.py"
  GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
  # The step markers module beside the probe (a kit's lib/, or the checkout's).
  MARKS_PATH="$(dirname "$PROBE")"
  [ -f "$MARKS_PATH/podscope_step.py" ] || MARKS_PATH="$ROOT/agent/probe/python"
  # One rank per GPU: torchrun for several (its children get RANK, LOCAL_RANK, WORLD_SIZE).
  loop() {  # loop SECONDS OUT [ENV...]: the training loop on every GPU
    local seconds=$1 out=$2
    shift 2
    if [ "$GPUS" -gt 1 ]; then
      env "$@" PYTHONPATH="$MARKS_PATH" torchrun --standalone --nproc-per-node "$GPUS" "$LOOP" \
        --seconds "$seconds" --out "$out" --marks "${LOOP_MARKS:-nvtx}"
    else
      env "$@" PYTHONPATH="$MARKS_PATH" RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 python3 "$LOOP" \
        --seconds "$seconds" --out "$out" --marks "${LOOP_MARKS:-nvtx}"
    fi
  }
  probed() {  # the variables that load the probe into a launcher's children, for job $1
    echo "CUDA_INJECTION64_PATH=$PROBE NCCL_PROFILER_PLUGIN=$PROBE NVTX_INJECTION64_PATH=$PROBE PODSCOPE_AGENT_SOCKET=$SOCKET PODSCOPE_JOB=$1"
  }
  echo "torch: $GPUS GPU(s)" | tee -a "$WORK/summary.txt"
  # Overhead in interleaved rounds: no probe, the probe loaded and watching, the probe loaded
  # with PODSCOPE_WATCH=0, each ROUND_S seconds, ROUNDS times, so that the machine's drift falls
  # on all three alike; the spread of the rounds says what the figure is worth.
  for round in $(seq "${ROUNDS:-3}"); do
    loop "${ROUND_S:-10}" "$WORK/steps-base-$round-{rank}.json" >>"$WORK/torch-rounds.log" 2>&1 || true
    loop "${ROUND_S:-10}" "$WORK/steps-idle-$round-{rank}.json" $(probed gpu-torch-idle) \
      >>"$WORK/torch-rounds.log" 2>&1 || true
    loop "${ROUND_S:-10}" "$WORK/steps-nowatch-$round-{rank}.json" $(probed gpu-torch-nowatch) PODSCOPE_WATCH=0 \
      >>"$WORK/torch-rounds.log" 2>&1 || true
  done
  # What the watch saw of the idle runs (their NVTX steps, between windows).
  api "/v1/watch/jobs/gpu-torch-idle" >"$WORK/torch-watch.json" || echo '{}' >"$WORK/torch-watch.json"
  # The Python step module (podscope_step.py beside the probe) in place of NVTX.
  LOOP_MARKS=podscope loop 10 "$WORK/steps-pymarks-{rank}.json" $(probed gpu-torch-pymarks) \
    >"$WORK/torch-pymarks.log" 2>&1 || true
  api "/v1/watch/jobs/gpu-torch-pymarks" >"$WORK/torch-watch-pymarks.json" || echo '{}' >"$WORK/torch-watch-pymarks.json"
  loop 20 "$WORK/steps-capture-{rank}.json" $(probed gpu-torch) >"$WORK/torch-capture.log" 2>&1 &
  TRAIN=$!
  PIDS+=("$TRAIN")
  wait_worker gpu-torch || true
  sleep 5
  ID=$(capture gpu-torch 5000) || true
  wait "$TRAIN" || true
  api "/v1/captures/$ID" >"$WORK/torch-capture.json" || true
  api "/v1/captures/$ID/communication" >"$WORK/torch-communication.json" || true
  api "/v1/captures/$ID/steps" >"$WORK/torch-steps.json" || true
  api "/v1/captures/$ID/trace" >"$WORK/torch-trace.json" || true
  # The watch goes on after a window (CUPTI took NVTX's slots for its length).
  api "/v1/watch/jobs/gpu-torch" >"$WORK/torch-watch-after.json" || echo '{}' >"$WORK/torch-watch-after.json"
  python3 - "$WORK" "$GPUS" "${ROUNDS:-3}" <<'PY' | tee -a "$WORK/summary.txt" || true
import json, statistics, sys
work, gpus, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cap = json.load(open(f"{work}/torch-capture.json"))
workers = cap["workers"]
w = workers[0]
start, stop = w["actual_start_ns"], w["actual_stop_ns"]
def median_ms(path, inside=None):
    steps = json.load(open(path))[5:]  # warm-up excluded
    if inside:
        steps = [s for s in steps if inside[0] <= s["start_ns"] and s["start_ns"] + s["duration_ns"] <= inside[1]]
    return statistics.median(s["duration_ns"] for s in steps) / 1e6, len(steps)
idle_pct, nowatch_pct = [], []
for r in range(1, rounds + 1):
    base, nb = median_ms(f"{work}/steps-base-{r}-0.json")
    idle, ni = median_ms(f"{work}/steps-idle-{r}-0.json")
    nowatch, nn = median_ms(f"{work}/steps-nowatch-{r}-0.json")
    idle_pct.append(100 * (idle / base - 1))
    nowatch_pct.append(100 * (nowatch / base - 1))
    print(f"round {r}: no probe {base:.3f} ms ({nb} steps), probe watching {idle:.3f} ms ({idle_pct[-1]:+.2f}%), "
          f"PODSCOPE_WATCH=0 {nowatch:.3f} ms ({nowatch_pct[-1]:+.2f}%)")
spread = lambda v: max(v) - min(v)
print(f"overhead over {rounds} interleaved rounds: watching {statistics.mean(idle_pct):+.2f}% "
      f"(rounds spread {spread(idle_pct):.2f} points), PODSCOPE_WATCH=0 {statistics.mean(nowatch_pct):+.2f}% "
      f"(spread {spread(nowatch_pct):.2f})")
base_last, _ = median_ms(f"{work}/steps-base-{rounds}-0.json")
during, nc = median_ms(f"{work}/steps-capture-0.json", (start, stop))
print(f"capturing: {during:.3f} ms ({nc} steps) = {100 * (during / base_last - 1):+.2f}% against the last round's no-probe run")
def watched(name):
    try:
        return sum(r.get("steps", 0) for r in json.load(open(f"{work}/{name}")).get("ranks", []))
    except (OSError, ValueError):
        return 0
watched_steps = watched("torch-watch.json")
pymarks_steps = watched("torch-watch-pymarks.json")
after_window_steps = watched("torch-watch-after.json")
trace = json.load(open(f"{work}/torch-trace.json"))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
kernels = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "kernel")
comm = json.load(open(f"{work}/torch-communication.json"))
collectives = sum(r.get("collectives", 0) for r in comm.get("ranks", comm.get("workers", [])))
steps = json.load(open(f"{work}/torch-steps.json"))["workers"][0]
lost = 0
for x in workers:
    reasons = x.get("dropped_reasons", {})
    lost += x["dropped_events"] - sum(n for r, n in reasons.items() if "the window" in r or "no time" in r)
print(f"torch: state {cap['state']}, {len(workers)} worker(s), kernels {kernels}, collectives {collectives}, "
      f"steps {len(steps['steps'])} ({steps['step_source']}), dropped {[x['dropped_events'] for x in workers]}, "
      f"steps in the watch window: NVTX {watched_steps}, podscope_step {pymarks_steps}, after a capture {after_window_steps}")
ok = cap["state"] == "complete" and len(workers) == max(gpus, 1) and kernels > 0 and len(steps["steps"]) > 0 \
     and steps["step_source"] == "markers" and lost == 0 and watched_steps > 0 and pymarks_steps > 0 \
     and after_window_steps > 0
if gpus > 1:
    ok = ok and collectives > 0
else:
    print("torch: one GPU: NCCL refuses a second rank there and never calls its profiler plugin for one, "
          "so the plugin's collective path is NOT exercised by this run")
print("TORCH_CHECK", "ok" if ok else "failed")
PY
  grep -q "TORCH_CHECK ok" "$WORK/summary.txt" && rc=0 || rc=1
  check torch "$rc" "kernels and marked steps captured (and AllReduces with several GPUs), nothing lost, NVTX and podscope_step steps watched, before and after a window"
  # No marks at all: with one GPU (no collectives) the steps come from the period of the kernel
  # launches, and they must last what the loop's own steps last.
  LOOP_MARKS=none loop 12 "$WORK/steps-nomarks-{rank}.json" $(probed gpu-torch-nomarks) \
    >"$WORK/torch-nomarks.log" 2>&1 &
  TRAIN=$!
  PIDS+=("$TRAIN")
  wait_worker gpu-torch-nomarks || true
  sleep 4
  ID=$(capture gpu-torch-nomarks 3000) || true
  wait "$TRAIN" || true
  api "/v1/captures/$ID/steps" >"$WORK/torch-nomarks-steps.json" || echo '{}' >"$WORK/torch-nomarks-steps.json"
  python3 - "$WORK" "$GPUS" <<'PY' | tee -a "$WORK/summary.txt" || true
import json, statistics, sys
work, gpus = sys.argv[1], int(sys.argv[2])
try:
    w = json.load(open(f"{work}/torch-nomarks-steps.json"))["workers"][0]
    loop = statistics.median(s["duration_ns"] for s in json.load(open(f"{work}/steps-nomarks-0.json"))[5:])
except (OSError, ValueError, KeyError, IndexError, statistics.StatisticsError) as e:
    print(f"torch without marks: no result ({e})")
    print("NOMARKS_CHECK failed")
    sys.exit(0)
# A step's period on the device: its span and the device's idle before the next one.
periods = [s["span_ns"] + n["before_ns"] for s, n in zip(w["steps"], w["steps"][1:])]
found = statistics.median(periods) if periods else 0
want = "launches" if gpus <= 1 else "inferred"
print(f"torch without marks: {len(w['steps'])} steps ({w['step_source']}, expected {want}), "
      f"median period {found / 1e6:.3f} ms against the loop's own {loop / 1e6:.3f} ms")
ok = w["step_source"] == want and len(w["steps"]) >= 3 and abs(found / loop - 1) <= 0.15
print("NOMARKS_CHECK", "ok" if ok else "failed")
PY
  grep -q "NOMARKS_CHECK ok" "$WORK/summary.txt" && rc=0 || rc=1
  check torch-no-marks "$rc" "a loop without marks gets steps from its kernel launches (one GPU) or collectives, as long as its own"
  # The probe and the agent stream the window (PODSCOPE_STREAM_MS, stream_interval_ms): the
  # agent's peak holds about a second of the rank's events, not the 5 s window.
  echo "agent peak RSS over the run: $(awk '/VmHWM/ {printf "%.0f MB", $2 / 1024}' "/proc/${PIDS[1]}/status")" |
    tee -a "$WORK/summary.txt"
fi

echo "summary in $WORK/summary.txt"
exit "$FAILED"
