#include "agent/probe/device_catalog.h"

#include <algorithm>

namespace podscope::agent::probe {

std::vector<common::DeviceInfo> DeviceCatalog::For(const std::vector<Harvest>& harvests,
                                                   const DeviceDescriber& describer) {
  std::set<int32_t> used;
  for (const Harvest& h : harvests) {
    used.insert(h.trace.kernels.device.begin(), h.trace.kernels.device.end());
    used.insert(h.trace.memcpys.device.begin(), h.trace.memcpys.device.end());
  }
  std::vector<int32_t> unknown;
  for (int32_t id : used) {
    if (!described_.contains(id) && !undescribed_.contains(id)) unknown.push_back(id);
  }
  if (!unknown.empty() && describer) {
    for (common::DeviceInfo& d : describer(unknown)) {
      if (std::find(unknown.begin(), unknown.end(), d.id) != unknown.end())
        described_[d.id] = std::move(d);
    }
    for (int32_t id : unknown) {
      if (!described_.contains(id)) undescribed_.insert(id);
    }
  }
  std::vector<common::DeviceInfo> out;
  for (int32_t id : used) {
    if (auto it = described_.find(id); it != described_.end()) out.push_back(it->second);
  }
  return out;
}

}  // namespace podscope::agent::probe
