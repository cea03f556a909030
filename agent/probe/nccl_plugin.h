// NCCL's profiler plugin entry points (v6, v5 and v4) onto an NcclRecorder. The shared library
// exports the three tables as `ncclProfiler_v6`, `ncclProfiler_v5` and `ncclProfiler_v4`
// (probe_entry.cc); tests call them through the same tables NCCL would.
#pragma once

#include "agent/probe/nccl_profiler_abi.h"
#include "agent/probe/nccl_recorder.h"

namespace podscope::agent::probe {

// Where the plugin finds its recorder: called at every communicator's init; null makes init
// fail, so NCCL disables the plugin for that communicator and never calls it again.
using NcclRecorderProvider = NcclRecorder* (*)();
void SetNcclRecorderProvider(NcclRecorderProvider provider);
// Told, at each communicator's init, which interface version NCCL uses ("nccl-profiler-v5").
using NcclVersionHook = void (*)(const char* feature);
void SetNcclVersionHook(NcclVersionHook hook);

extern const nccl_abi::ProfilerV6 kNcclProfilerV6;
extern const nccl_abi::ProfilerV5 kNcclProfilerV5;
extern const nccl_abi::ProfilerV4 kNcclProfilerV4;

}  // namespace podscope::agent::probe
