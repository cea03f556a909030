#include "agent/watch/watch_queue.h"

#include "common/watch_wire.h"

namespace podscope::agent {

void WatchQueue::Step(std::string_view job, const common::StepSummary& step) {
  absl::MutexLock lock(&mu_);
  ++counters_.pushed_steps;
  if (limits_.max_steps == 0) {
    ++counters_.dropped_steps;
    return;
  }
  while (steps_.size() >= limits_.max_steps) {
    steps_.pop_front();
    ++counters_.dropped_steps;
  }
  steps_.emplace_back(std::string(job), step);
}

void WatchQueue::Progress(std::string_view job, const common::RankProgress& progress) {
  absl::MutexLock lock(&mu_);
  ProgressKey key{std::string(job), progress.rank, progress.communicator};
  auto it = progress_.find(key);
  if (it != progress_.end()) {
    it->second = progress;
    return;
  }
  if (progress_.size() >= limits_.max_progress) {
    ++counters_.dropped_progress;
    return;
  }
  progress_.emplace(std::move(key), progress);
}

v1::WatchBatch WatchQueue::Take(std::string_view agent_id, size_t max_steps) {
  common::WatchBatchBuilder builder;
  uint64_t dropped = 0;
  {
    absl::MutexLock lock(&mu_);
    for (size_t n = 0; n < max_steps && !steps_.empty(); ++n) {
      builder.Add(steps_.front().first, steps_.front().second);
      steps_.pop_front();
    }
    for (const auto& [key, p] : progress_) builder.Add(std::get<0>(key), p);
    progress_.clear();
    dropped = counters_.dropped_steps;
  }
  v1::WatchBatch batch = builder.Take();
  if (batch.steps_size() == 0 && batch.progress_size() == 0) return batch;
  batch.set_agent_id(std::string(agent_id));
  batch.set_dropped_steps(dropped);
  return batch;
}

void WatchQueue::Lost(const v1::WatchBatch& batch) {
  absl::MutexLock lock(&mu_);
  counters_.dropped_steps += static_cast<uint64_t>(batch.steps_size());
}

size_t WatchQueue::queued_steps() const {
  absl::MutexLock lock(&mu_);
  return steps_.size();
}

WatchQueueCounters WatchQueue::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

}  // namespace podscope::agent
