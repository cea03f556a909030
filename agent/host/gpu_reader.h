// GPU health for host samples: SM clock, power, temperature, throttle reasons, memory used. The
// real reader is NVML, loaded with dlopen so the agent runs (and says so once) on nodes without a
// driver.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"

namespace podscope::agent::host {

struct GpuSample {
  int32_t sm_clock_mhz = 0;
  int32_t power_mw = 0;
  int32_t temperature_c = 0;
  uint64_t throttle_reasons = 0;   // NVML's clocks-event-reason bits
  int64_t memory_used_bytes = -1;  // the device's, every process's together; -1: unknown
};

class GpuReader {
 public:
  virtual ~GpuReader() = default;
  // nullopt when that GPU cannot be read now (index out of range, device lost).
  virtual std::optional<GpuSample> Read(int index) = 0;
};

// libnvidia-ml.so.1 (or `path`), initialised. Unavailable with the reason when there is no NVML
// or no driver.
absl::StatusOr<std::unique_ptr<GpuReader>> OpenNvml(const std::string& path = "");

}  // namespace podscope::agent::host
