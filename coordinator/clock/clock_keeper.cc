#include "coordinator/clock/clock_keeper.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace podscope::coordinator {

ClockKeeper::ClockKeeper(AgentRegistry& registry, const ClockAligner& aligner,
                         ClockKeeperOptions options, const common::TimeSource& time)
    : registry_(registry), aligner_(aligner), options_(options), time_(time) {}

ClockKeeper::~ClockKeeper() { Stop(); }

void ClockKeeper::Start() {
  thread_ = std::thread([this] {
    // A tick after the time the last one used, however long it took.
    TimeNs ticked = time_.Now();
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (time_.AwaitUntil(mu_, absl::Condition(&stopping_), ticked + options_.tick_ns)) return;
      }
      ticked = time_.Now();
      Tick();
    }
  });
}

void ClockKeeper::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

size_t ClockKeeper::Tick() {
  const TimeNs now = time_.Now();
  const std::vector<std::string> connected = registry_.ConnectedIds();
  struct Wide {
    const std::string* agent_id;
    int64_t bound;
  };
  std::vector<Wide> wide;
  absl::MutexLock lock(&mu_);
  // Agents gone from the registry take their back-off with them.
  std::map<std::string, AgentState> kept;
  for (const std::string& id : connected) {
    auto node = state_.extract(id);
    AgentState state = node.empty() ? AgentState{.first_seen_ns = now} : node.mapped();
    absl::StatusOr<ClockFit> fit = aligner_.Fit(id);  // cached until new samples arrive
    if (!fit.ok()) {
      // No usable exchange yet: its burst at connect failed (timed out on a crowded host, say).
      // Once it had time for one, it is the widest of all.
      if (now - state.first_seen_ns >= options_.first_retry_ns && now >= state.next_ask_ns) {
        wide.push_back({&id, std::numeric_limits<int64_t>::max()});
      }
    } else {
      // What this agent's path allows: the tightest bound any of its fits had at its newest
      // exchange. Past its first few asks, a model above the target is wide only when it is
      // over twice that.
      state.best_bound_ns = std::min(state.best_bound_ns, fit->model.error_bound_ns);
      const int64_t bound = fit->ErrorBoundAt(fit->model.ToLocal(now));
      // The back-off starts over only once the model is within the target: an agent whose
      // path cannot get there is asked ever more rarely (at most every max_retry, about as
      // often as it syncs on its own), whatever its bound does between asks.
      if (bound <= options_.target_bound_ns) state.asks = 0, state.retry_ns = 0;
      const bool wide_now =
          bound > options_.target_bound_ns &&
          (state.asks < options_.asks_before_relative || bound > 2 * state.best_bound_ns);
      if (wide_now && now >= state.next_ask_ns) wide.push_back({&id, bound});
    }
    kept.emplace(id, state);
  }
  state_ = std::move(kept);
  std::sort(wide.begin(), wide.end(),
            [](const Wide& a, const Wide& b) { return a.bound > b.bound; });
  if (wide.size() > options_.max_requests_per_tick) wide.resize(options_.max_requests_per_tick);
  v1::CoordinatorMessage sync;
  sync.mutable_sync_clock();
  for (const Wide& w : wide) {
    AgentState& state = state_[*w.agent_id];
    state.retry_ns = state.retry_ns == 0 ? options_.first_retry_ns
                                         : std::min(state.retry_ns * 2, options_.max_retry_ns);
    state.next_ask_ns = now + state.retry_ns;
    ++state.asks;
    registry_.Send(*w.agent_id, sync);
  }
  return wide.size();
}

}  // namespace podscope::coordinator
