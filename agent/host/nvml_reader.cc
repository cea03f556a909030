// NVML through dlopen: the few entry points host samples need, declared here (nvml.h is not
// needed to build the agent). NVML's calls return 0 on success.
#include <dlfcn.h>

#include <cstdint>
#include <string>

#include "agent/host/gpu_reader.h"
#include "common/str_util.h"

namespace podscope::agent::host {

namespace {

using NvmlDevice = void*;
constexpr unsigned kNvmlClockSm = 1;
constexpr unsigned kNvmlTemperatureGpu = 0;
// nvmlMemory_t (v1): bytes on the device.
struct NvmlMemory {
  unsigned long long total, free, used;
};

struct NvmlSymbols {
  int (*init)();
  int (*handle_by_index)(unsigned, NvmlDevice*);
  int (*clock_info)(NvmlDevice, unsigned, unsigned*);
  int (*power_usage)(NvmlDevice, unsigned*);
  int (*temperature)(NvmlDevice, unsigned, unsigned*);
  int (*throttle_reasons)(NvmlDevice, unsigned long long*);
  int (*memory_info)(NvmlDevice, NvmlMemory*);  // optional
};

class NvmlReader : public GpuReader {
 public:
  explicit NvmlReader(NvmlSymbols s) : s_(s) {}

  std::optional<GpuSample> Read(int index) override {
    NvmlDevice device = nullptr;
    if (index < 0 || s_.handle_by_index(static_cast<unsigned>(index), &device) != 0)
      return std::nullopt;
    GpuSample g;
    unsigned value = 0;
    if (s_.clock_info(device, kNvmlClockSm, &value) == 0)
      g.sm_clock_mhz = static_cast<int32_t>(value);
    if (s_.power_usage(device, &value) == 0) g.power_mw = static_cast<int32_t>(value);
    if (s_.temperature(device, kNvmlTemperatureGpu, &value) == 0)
      g.temperature_c = static_cast<int32_t>(value);
    unsigned long long reasons = 0;
    if (s_.throttle_reasons != nullptr && s_.throttle_reasons(device, &reasons) == 0)
      g.throttle_reasons = reasons;
    NvmlMemory memory{};
    if (s_.memory_info != nullptr && s_.memory_info(device, &memory) == 0 &&
        memory.used <= INT64_MAX) {
      g.memory_used_bytes = static_cast<int64_t>(memory.used);
    }
    return g;
  }

 private:
  NvmlSymbols s_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuReader>> OpenNvml(const std::string& path) {
  const std::string library = path.empty() ? "libnvidia-ml.so.1" : path;
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    return absl::UnavailableError(common::StrCat("NVML not loaded: ", dlerror()));
  NvmlSymbols s{};
  s.init = reinterpret_cast<int (*)()>(dlsym(handle, "nvmlInit_v2"));
  s.handle_by_index = reinterpret_cast<int (*)(unsigned, NvmlDevice*)>(
      dlsym(handle, "nvmlDeviceGetHandleByIndex_v2"));
  s.clock_info = reinterpret_cast<int (*)(NvmlDevice, unsigned, unsigned*)>(
      dlsym(handle, "nvmlDeviceGetClockInfo"));
  s.power_usage =
      reinterpret_cast<int (*)(NvmlDevice, unsigned*)>(dlsym(handle, "nvmlDeviceGetPowerUsage"));
  s.temperature = reinterpret_cast<int (*)(NvmlDevice, unsigned, unsigned*)>(
      dlsym(handle, "nvmlDeviceGetTemperature"));
  // Renamed in recent drivers; either name reads the same bits.
  void* reasons = dlsym(handle, "nvmlDeviceGetCurrentClocksEventReasons");
  if (reasons == nullptr) reasons = dlsym(handle, "nvmlDeviceGetCurrentClocksThrottleReasons");
  s.throttle_reasons = reinterpret_cast<int (*)(NvmlDevice, unsigned long long*)>(reasons);
  s.memory_info =
      reinterpret_cast<int (*)(NvmlDevice, NvmlMemory*)>(dlsym(handle, "nvmlDeviceGetMemoryInfo"));
  if (s.init == nullptr || s.handle_by_index == nullptr || s.clock_info == nullptr ||
      s.power_usage == nullptr || s.temperature == nullptr) {
    dlclose(handle);
    return absl::UnavailableError(common::StrCat(library, " lacks the NVML v2 entry points"));
  }
  if (const int r = s.init(); r != 0) {
    dlclose(handle);
    return absl::UnavailableError(
        common::StrCat("nvmlInit failed (NVML error ", r, "): no driver on this node?"));
  }
  return std::unique_ptr<GpuReader>(new NvmlReader(s));
}

}  // namespace podscope::agent::host
