#include "coordinator/clock/clock_aligner.h"

#include "common/str_util.h"

namespace podscope::coordinator {

void ClockAligner::AddSamples(std::string_view agent_id, std::span<const ClockSample> samples) {
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) it = agents_.emplace(std::string(agent_id), Agent()).first;
  Agent& agent = it->second;
  std::deque<ClockSample>& kept = agent.samples;
  for (const ClockSample& s : samples) kept.push_back(s);
  ++agent.version;
  if (kept.empty()) return;
  const TimeNs newest = kept.back().t2;
  while (kept.size() > options_.max_samples_per_agent ||
         (!kept.empty() && newest - kept.front().t2 > options_.max_sample_age_ns)) {
    kept.pop_front();
  }
}

absl::StatusOr<ClockFit> ClockAligner::Fit(std::string_view agent_id) const {
  std::vector<ClockSample> copy;
  uint64_t version = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = agents_.find(agent_id);
    if (it == agents_.end() || it->second.samples.empty()) {
      return absl::FailedPreconditionError(
          common::StrCat("agent ", agent_id, " has not synchronised its clock yet"));
    }
    if (it->second.fit && it->second.fit_version == it->second.version) return *it->second.fit;
    copy.assign(it->second.samples.begin(), it->second.samples.end());
    version = it->second.version;
  }
  // Fitted outside the lock; whoever fits the newest samples first caches it.
  absl::StatusOr<ClockFit> fit = FitClock(copy, options_.fit);
  if (!fit.ok()) {
    return absl::FailedPreconditionError(
        common::StrCat("agent ", agent_id, ": ", std::string(fit.status().message())));
  }
  absl::MutexLock lock(&mu_);
  if (auto it = agents_.find(agent_id); it != agents_.end() && it->second.version == version) {
    it->second.fit = std::make_shared<const ClockFit>(*fit);
    it->second.fit_version = version;
  }
  return fit;
}

size_t ClockAligner::SampleCount(std::string_view agent_id) const {
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(agent_id);
  return it == agents_.end() ? 0 : it->second.samples.size();
}

void ClockAligner::Forget(std::string_view agent_id) {
  absl::MutexLock lock(&mu_);
  if (auto it = agents_.find(agent_id); it != agents_.end()) agents_.erase(it);
}

}  // namespace podscope::coordinator
