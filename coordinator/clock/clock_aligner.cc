#include "coordinator/clock/clock_aligner.h"

#include "common/str_util.h"

namespace podscope::coordinator {

void ClockAligner::AddSamples(std::string_view agent_id, std::span<const ClockSample> samples) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = samples_.find(agent_id);
  if (it == samples_.end()) it = samples_.emplace(std::string(agent_id), std::deque<ClockSample>()).first;
  std::deque<ClockSample>& kept = it->second;
  for (const ClockSample& s : samples) kept.push_back(s);
  if (kept.empty()) return;
  const TimeNs newest = kept.back().t2;
  while (kept.size() > options_.max_samples_per_agent ||
         (!kept.empty() && newest - kept.front().t2 > options_.max_sample_age_ns)) {
    kept.pop_front();
  }
}

absl::StatusOr<ClockFit> ClockAligner::Fit(std::string_view agent_id) const {
  std::vector<ClockSample> copy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = samples_.find(agent_id);
    if (it == samples_.end() || it->second.empty()) {
      return absl::FailedPreconditionError(common::StrCat("agent ", agent_id, " has not synchronised its clock yet"));
    }
    copy.assign(it->second.begin(), it->second.end());
  }
  absl::StatusOr<ClockFit> fit = FitClock(copy, options_.fit);
  if (!fit.ok()) {
    return absl::FailedPreconditionError(common::StrCat("agent ", agent_id, ": ", std::string(fit.status().message())));
  }
  return fit;
}

size_t ClockAligner::SampleCount(std::string_view agent_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = samples_.find(agent_id);
  return it == samples_.end() ? 0 : it->second.size();
}

void ClockAligner::Forget(std::string_view agent_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = samples_.find(agent_id); it != samples_.end()) samples_.erase(it);
}

}  // namespace podscope::coordinator
