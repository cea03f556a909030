#include "agent/start_timer.h"

#include <pthread.h>
#include <sched.h>

#include <vector>

#include "spdlog/spdlog.h"

namespace podscope::agent {

StartTimer::StartTimer() {
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
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

StartTimer::Id StartTimer::Schedule(TimeNs at_host_ns, std::function<void()> fire) {
  std::lock_guard<std::mutex> lock(mu_);
  const Id id = next_id_++;
  const bool earliest = pending_.empty() || at_host_ns < pending_.begin()->first.first;
  pending_.emplace(std::make_pair(at_host_ns, id), std::move(fire));
  at_of_.emplace(id, at_host_ns);
  if (earliest) cv_.notify_all();
  return id;
}

bool StartTimer::Cancel(Id id) {
  std::unique_lock<std::mutex> lock(mu_);
  if (auto it = at_of_.find(id); it != at_of_.end()) {
    pending_.erase({it->second, id});
    at_of_.erase(it);
    return true;
  }
  done_cv_.wait(lock, [&] { return !firing_.count(id); });
  return false;
}

void StartTimer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (pending_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const TimeNs at = pending_.begin()->first.first;
    if (const TimeNs left = at - HostNowNs(); left > 0) {
      cv_.wait_for(lock, std::chrono::nanoseconds(left));
      continue;
    }
    // Everything due now goes in one batch, fired back to back without the lock.
    std::vector<std::function<void()>> batch;
    const TimeNs now = HostNowNs();
    while (!pending_.empty() && pending_.begin()->first.first <= now) {
      auto node = pending_.extract(pending_.begin());
      at_of_.erase(node.key().second);
      firing_.insert(node.key().second);
      batch.push_back(std::move(node.mapped()));
    }
    lock.unlock();
    for (std::function<void()>& fire : batch) fire();
    lock.lock();
    firing_.clear();
    done_cv_.notify_all();
  }
}

}  // namespace podscope::agent
