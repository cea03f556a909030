#!/bin/sh
# libpodscope_probe.so must export what CUDA (InitializeInjection), NVTX
# (InitializeInjectionNvtx2), NCCL (ncclProfiler_v6 and the v5 and v4 fallbacks) and
# podscope/step.h look up, and nothing else: every other symbol stays inside, so the probe cannot
# clash with the training process's own libraries.
set -eu
lib="$1"
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
want="InitializeInjection
InitializeInjectionNvtx2
ncclProfiler_v4
ncclProfiler_v5
ncclProfiler_v6
podscope_probe_step_begin
podscope_probe_step_end"
if [ "$exported" != "$want" ]; then
  echo "exported symbols of $lib:"
  echo "$exported"
  echo "want exactly:"
  echo "$want"
  exit 1
fi
echo "ok: $lib exports exactly the probe's entry points"
