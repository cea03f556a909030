#include "agent/start_timer.h"

#include <pthread.h>
#include <sched.h>

#include <vector>

#include "spdlog/spdlog.h"

namespace podscope::agent {

StartTimer::StartTimer(const common::TimeSource& time) : time_(time) {
  thread_ = std::thread([this] {
    // Real-time priority, where the agent may have it (root, or CAP_SYS_NICE): a start must not
    // wait for a core behind whatever else the host runs at that instant. The thread sleeps but
    // for a few microseconds per start, so it takes nothing from anyone.
    sched_param param{};
    param.sched_priority = 1;
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) != 0) {
      spdlog::debug("start timer: no real-time priority; starts may be late on a busy host");
    }
    Loop();
  });
}

StartTimer::~StartTimer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

StartTimer::Id StartTimer::Schedule(common::TimeNs at_host_ns, std::function<void()> fire) {
  absl::MutexLock lock(&mu_);
  const Id id = next_id_++;
  const bool earliest = pending_.empty() || at_host_ns < pending_.begin()->first.first;
  pending_.emplace(std::make_pair(at_host_ns, id), std::move(fire));
  at_of_.emplace(id, at_host_ns);
  if (earliest) ++earliest_changes_;
  return id;
}

bool StartTimer::Cancel(Id id) {
  absl::MutexLock lock(&mu_);
  if (auto it = at_of_.find(id); it != at_of_.end()) {
    pending_.erase({it->second, id});
    at_of_.erase(it);
    return true;
  }
  const auto returned = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !firing_.count(id); };
  mu_.Await(absl::Condition(&returned));
  return false;
}

void StartTimer::Loop() {
  mu_.Lock();
  while (!stopping_) {
    if (pending_.empty()) {
      const auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !pending_.empty();
      };
      mu_.Await(absl::Condition(&work));
      continue;
    }
    const common::TimeNs at = pending_.begin()->first.first;
    if (time_.Now() < at) {
      const uint64_t changes = earliest_changes_;
      const auto interrupted = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || earliest_changes_ != changes;
      };
      time_.AwaitUntil(mu_, absl::Condition(&interrupted), at);
      continue;
    }
    // Everything due now goes in one batch, fired back to back without the lock.
    std::vector<std::function<void()>> batch;
    const common::TimeNs now = time_.Now();
    while (!pending_.empty() && pending_.begin()->first.first <= now) {
      auto node = pending_.extract(pending_.begin());
      at_of_.erase(node.key().second);
      firing_.insert(node.key().second);
      batch.push_back(std::move(node.mapped()));
    }
    mu_.Unlock();
    for (std::function<void()>& fire : batch) fire();
    mu_.Lock();
    firing_.clear();
  }
  mu_.Unlock();
}

}  // namespace podscope::agent
