// libpodscope_probe.so's entry points: what CUDA, NCCL and the step API look up by name. The
// probe comes alive on the first of them (CUDA's injection at cuInit, or NCCL's first
// communicator, or a step mark), once per process, and stays until the process exits: its
// threads hold nothing a clean exit needs, so it is deliberately never torn down.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "agent/probe/cuda_devices.h"
#include "agent/probe/cupti_loader.h"
#include "agent/probe/cupti_source.h"
#include "agent/probe/nccl_plugin.h"
#include "agent/probe/nvtx_hooks.h"
#include "agent/probe/probe_runtime.h"
#include "agent/probe/step_source.h"

namespace podscope::agent::probe {
namespace {

struct Probe {
  ProbeSettings settings;
  NcclRecorder nccl;
  StepSource steps;
  std::unique_ptr<CuptiApi> cupti;
  std::unique_ptr<CuptiSource> cupti_source;
  std::unique_ptr<ProbeRuntime> runtime;
};

Probe* TheProbe() {
  static Probe* probe = [] {
    std::string warnings;
    ProbeSettings settings =
        SettingsFromEnvironment([](const char* n) { return std::getenv(n); }, &warnings);
    if (settings.disabled) return static_cast<Probe*>(nullptr);
    auto* p = new Probe;  // never freed: see above
    p->settings = settings;
    ProbeDescription description = DescribeThisProcess();
    description.warnings = warnings;
    p->runtime = std::make_unique<ProbeRuntime>(settings, std::move(description),
                                                std::vector<EventSource*>{&p->nccl, &p->steps});
    p->runtime->AddWatchSource(&p->nccl);
    p->runtime->AddWatchSource(&p->steps);
    p->runtime->Start();
    if (!warnings.empty()) std::fprintf(stderr, "podscope probe: %s\n", warnings.c_str());
    return p;
  }();
  return probe;
}

NcclRecorder* RecorderForNccl() {
  Probe* p = TheProbe();
  return p != nullptr ? &p->nccl : nullptr;
}

int64_t ThreadId() { return static_cast<int64_t>(syscall(SYS_gettid)); }

// The file this library was loaded from.
std::string OwnPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ThreadId), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  return info.dli_fname;
}

// NVTX's injection point, once per copy of NVTX in the process: the step hooks go into its
// table, in front of CUPTI's handlers when CUPTI is loaded (else CUPTI is chained when CUDA
// starts it: StartCupti). CUPTI is never started from here: NVTX's first call may come before
// CUDA's, and starting CUPTI then could bring the driver up inside NVTX's initialisation.
// 1: NVTX keeps the injection.
int StartNvtx(NvtxGetExportTableFunc_t get) {
  Probe* p = TheProbe();
  if (p == nullptr) return 0;
  absl::StatusOr<common::StepPattern> pattern =
      common::StepPattern::Compile(p->settings.step_pattern);
  if (!pattern.ok()) return 1;  // logged at load: no range is a step (CUPTI is chained anyway)
  InstallNvtxStepHooks(get, *std::move(pattern),
                       [p](bool begin, uint64_t step, int64_t thread, bool cupti_sees_it) {
                         // Inside a window CUPTI records the range as a step itself.
                         if (begin) {
                           p->steps.Begin(step, thread, cupti_sees_it);
                         } else {
                           p->steps.End(step, thread, cupti_sees_it);
                         }
                       });
  p->runtime->AddFeature("nvtx");
  return 1;
}

// CUPTI's own NVTX entry point, for the probe to chain (nullptr when this CUPTI has none).
NvtxInitializeInjectionNvtxFunc_t CuptiNvtxInit(const CuptiApi& api) {
  const std::string path = LoadedCuptiPath(api);
  void* cupti = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (cupti == nullptr) return nullptr;
  auto init =
      reinterpret_cast<NvtxInitializeInjectionNvtxFunc_t>(dlsym(cupti, "InitializeInjectionNvtx2"));
  dlclose(cupti);  // drops only the reference NOLOAD took: the library stays, and so does `init`
  return init;
}

// CUPTI, once, at CUDA's injection point.
int StartCupti() {
  Probe* p = TheProbe();
  if (p == nullptr) return 1;
  static std::once_flag once;
  std::call_once(once, [p] {
    absl::StatusOr<std::unique_ptr<CuptiApi>> api = LoadCupti(p->settings.cupti_path);
    if (!api.ok()) {
      p->runtime->AddWarning(std::string(api.status().message()));
      std::fprintf(stderr, "podscope probe: no GPU activity will be recorded: %s\n",
                   std::string(api.status().message()).c_str());
      return;
    }
    p->cupti = *std::move(api);
    // NVTX ranges reach CUPTI's MARKER records, and the probe's step marks between windows, only
    // through NVTX's injection hook: the probe takes it and passes every range on to CUPTI (a
    // process that set it itself keeps its own). NVTX reads it at each copy's first NVTX call,
    // so a job whose first range comes before CUDA starts sets it itself (docs/watch.md).
    if (const std::string self = OwnPath(); !self.empty()) {
      setenv("NVTX_INJECTION64_PATH", self.c_str(), /*overwrite=*/0);
    }
    ChainNvtxTool(CuptiNvtxInit(*p->cupti));
    CuptiSourceOptions options;
    options.buffers = p->settings.cupti_buffers;
    options.buffer_bytes = p->settings.cupti_buffer_bytes;
    options.step_pattern = p->settings.step_pattern;
    p->cupti_source = std::make_unique<CuptiSource>(p->cupti.get(), options);
    p->runtime->AddSource(p->cupti_source.get());
    p->runtime->SetClockReader(
        [source = p->cupti_source.get()](GpuClockMap* clock) { source->ReadClockPair(clock); });
    // The devices' limits from the driver the process loaded, for occupancy (none: no figures).
    p->runtime->SetDeviceDescriber([](const std::vector<int32_t>& ids) {
      const std::optional<CudaDeviceCalls> driver = FindCudaDriver();
      return driver ? DescribeDevices(*driver, ids) : std::vector<common::DeviceInfo>();
    });
    p->runtime->AddFeature("cupti");
    p->runtime->AddFeature("nvtx");
  });
  return 1;
}

// Wired at load: NCCL may find the plugin before CUDA's injection runs.
void NoteNcclVersion(const char* feature) {
  if (Probe* p = TheProbe(); p != nullptr) p->runtime->AddFeature(feature);
}

[[maybe_unused]] const bool kProviderSet = [] {
  SetNcclRecorderProvider(&RecorderForNccl);
  SetNcclVersionHook(&NoteNcclVersion);
  return true;
}();

}  // namespace
}  // namespace podscope::agent::probe

using podscope::agent::probe::kNcclProfilerV4;
using podscope::agent::probe::kNcclProfilerV5;
using podscope::agent::probe::kNcclProfilerV6;
using podscope::agent::probe::nccl_abi::ProfilerV4;
using podscope::agent::probe::nccl_abi::ProfilerV5;
using podscope::agent::probe::nccl_abi::ProfilerV6;

extern "C" {

// CUDA_INJECTION64_PATH: the driver calls this once, at cuInit. 1 means success.
__attribute__((visibility("default"))) int InitializeInjection(void) {
  return podscope::agent::probe::StartCupti();
}

// NVTX_INJECTION64_PATH: NVTX calls this once, at the process's first NVTX call.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  return podscope::agent::probe::StartNvtx(get);
}

// NCCL_PROFILER_PLUGIN: NCCL reads the newest version it knows.
__attribute__((visibility("default"))) ProfilerV6 ncclProfiler_v6 = kNcclProfilerV6;
__attribute__((visibility("default"))) ProfilerV5 ncclProfiler_v5 = kNcclProfilerV5;
__attribute__((visibility("default"))) ProfilerV4 ncclProfiler_v4 = kNcclProfilerV4;

// podscope/step.h finds these with dlsym.
__attribute__((visibility("default"))) void podscope_probe_step_begin(uint64_t step) {
  if (auto* p = podscope::agent::probe::TheProbe(); p != nullptr)
    p->steps.Begin(step, podscope::agent::probe::ThreadId());
}
__attribute__((visibility("default"))) void podscope_probe_step_end(uint64_t step) {
  if (auto* p = podscope::agent::probe::TheProbe(); p != nullptr)
    p->steps.End(step, podscope::agent::probe::ThreadId());
}

}  // extern "C"
