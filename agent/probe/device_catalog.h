// The GPUs a training process's windows ran on, described once per process: a window's
// kernels and copies name their device ids, and the describer (the CUDA driver, cuda_devices.h)
// is asked only for ids it has not been asked for yet.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "agent/probe/event_source.h"
#include "common/worker_trace.h"

namespace podscope::agent::probe {

using DeviceDescriber =
    std::function<std::vector<common::DeviceInfo>(const std::vector<int32_t>& ids)>;

// One thread (the probe's window thread).
class DeviceCatalog {
 public:
  // The devices the harvests' kernels and copies ran on, by id; those never described are left out.
  std::vector<common::DeviceInfo> For(const std::vector<Harvest>& harvests,
                                      const DeviceDescriber& describer);

 private:
  std::map<int32_t, common::DeviceInfo> described_;
  std::set<int32_t> undescribed_;  // asked for, and the describer did not know them
};

}  // namespace podscope::agent::probe
