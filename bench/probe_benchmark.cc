// What the probe costs a training process, per call, on the paths its threads take: an NCCL
// collective inside a window (the plugin's start, two kernel channels, stop), a step mark with
// and without a probe loaded, and turning CUPTI kernel records into the trace model (CUPTI's
// buffer-completion thread, not a training thread). Watch mode: the same collective
// and step mark between windows, and the probe's own flush of watch data.
#include <benchmark/benchmark.h>
#include <podscope/step.h>

#include "agent/probe/cupti_records.h"
#include "agent/probe/nccl_recorder.h"
#include "agent/probe/probe_runtime.h"
#include "agent/probe/step_source.h"

namespace podscope::agent::probe {
namespace {

// Collective number `n` as NCCL reports it: a 2 MiB AllReduce, two kernel channels started and
// stopped.
void* Collective(NcclRecorder& recorder, NcclCommunicator* comm, uint64_t n) {
  const NcclCollectiveStart start{.sequence = n,
                                  .func = "AllReduce",
                                  .count = 1 << 20,
                                  .datatype = "ncclBfloat16",
                                  .channels = 2,
                                  .algorithm = "RING",
                                  .protocol = "SIMPLE"};
  void* handle = recorder.StartCollective(comm, start);
  void* ch0 = recorder.StartKernelChannel(handle, 1000 + n);
  void* ch1 = recorder.StartKernelChannel(handle, 1001 + n);
  recorder.StopKernelChannel(ch0, 2000 + n);
  recorder.StopKernelChannel(ch1, 2001 + n);
  return handle;
}

void BM_NcclCollectiveInWindow(benchmark::State& state) {
  NcclRecorder recorder;
  int mask = 0;
  NcclCommunicator* comm = recorder.InitCommunicator(1, "dp", 8, 0, &mask);
  EventBudget budget;
  GpuClockMap clock;
  uint64_t n = 0;
  for (auto _ : state) {
    if ((n & 0xffff) == 0) {  // a fresh window now and then, so rows do not pile up
      state.PauseTiming();
      recorder.CloseWindow(0);
      recorder.TakeHarvest();
      budget.Reset(1 << 20);
      recorder.OpenWindow(0, &budget, &clock);
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(Collective(recorder, comm, n++));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NcclCollectiveInWindow);

// Between windows, watching: what each collective costs the training process (the launching
// thread and NCCL's proxy thread together).
void BM_NcclCollectiveWatching(benchmark::State& state) {
  NcclRecorder recorder;
  int mask = 0;
  NcclCommunicator* comm = recorder.InitCommunicator(1, "dp", 8, 0, &mask);
  recorder.SetWatching(true);
  GpuClockMap clock;
  uint64_t n = 0;
  WatchHarvest h;
  for (auto _ : state) {
    if ((n & 0xfff) == 0) {  // the flush, on the probe's thread: not the training process's
      state.PauseTiming();
      h = WatchHarvest();
      recorder.TakeWatch(1'000'000, clock, &h);
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(Collective(recorder, comm, n++));
  }
  if (h.dropped != 0) state.SkipWithError("the ring overran");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NcclCollectiveWatching);

// The probe's watch thread: taking `range(0)` finished collectives and sending them as one
// ProbeWatch message (built and serialized; the link is not connected, so it goes no further).
void BM_WatchFlush(benchmark::State& state) {
  NcclRecorder recorder;
  StepSource steps;
  int mask = 0;
  NcclCommunicator* comm = recorder.InitCommunicator(1, "dp", 8, 0, &mask);
  ProbeSettings settings;
  settings.agent_socket = "/nonexistent/podscope-bench.sock";
  ProbeRuntime runtime(settings, ProbeDescription(), {});
  runtime.AddWatchSource(&recorder);
  runtime.AddWatchSource(&steps);
  recorder.SetWatching(true);
  steps.SetWatching(true);
  uint64_t n = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (int64_t i = 0; i < state.range(0); ++i) Collective(recorder, comm, n++);
    state.ResumeTiming();
    benchmark::DoNotOptimize(runtime.FlushWatch());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_WatchFlush)->Arg(100)->Arg(1000);

void BM_StepMarkWithoutProbe(benchmark::State& state) {
  uint64_t step = 0;
  for (auto _ : state) {
    podscope_step_begin(step);
    podscope_step_end(step++);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StepMarkWithoutProbe);

void BM_StepMarkInWindow(benchmark::State& state) {
  StepSource steps;
  EventBudget budget;
  budget.Reset(UINT64_MAX >> 2);
  steps.OpenWindow(0, &budget, nullptr);
  uint64_t step = 0;
  for (auto _ : state) {
    steps.Begin(step, 1);
    steps.End(step++, 1);
    if ((step & 0xffff) == 0) {
      state.PauseTiming();
      steps.TakeHarvest();
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StepMarkInWindow);

void BM_StepMarkWatching(benchmark::State& state) {
  StepSource steps;
  steps.SetWatching(true);
  GpuClockMap clock;
  uint64_t step = 0;
  for (auto _ : state) {
    steps.Begin(step, 1);
    steps.End(step++, 1);
    if ((step & 0xfff) == 0) {
      state.PauseTiming();
      WatchHarvest h;
      steps.TakeWatch(0, clock, &h);
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StepMarkWatching);

void BM_CuptiKernelRecords(benchmark::State& state) {
  static const char* kNames[] = {"_Z5myAddPfS_i", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                                 "_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE"};
  std::vector<CUpti_ActivityKernel10> records(65536);
  for (size_t i = 0; i < records.size(); ++i) {
    CUpti_ActivityKernel10& k = records[i];
    k = {};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 1000 * i;
    k.end = 1000 * i + 500;
    k.name = kNames[i % 3];
    k.correlationId = static_cast<uint32_t>(i);
  }
  CuptiRecordConverter converter(nullptr, "^step ([0-9]+)$");
  GpuClockMap clock;
  for (auto _ : state) {
    for (const CUpti_ActivityKernel10& k : records)
      converter.Add(reinterpret_cast<const CUpti_Activity*>(&k));
    benchmark::DoNotOptimize(converter.Finish(clock));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(records.size()));
}
BENCHMARK(BM_CuptiKernelRecords);

}  // namespace
}  // namespace podscope::agent::probe

BENCHMARK_MAIN();
