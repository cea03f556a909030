#include "coordinator/agents/agent_registry.h"

#include <algorithm>
#include <set>

#include "common/str_util.h"

namespace podscope::coordinator {

std::string_view AgentHealthName(AgentHealth health) {
  switch (health) {
    case AgentHealth::kHealthy:
      return "healthy";
    case AgentHealth::kStale:
      return "stale";
    case AgentHealth::kDisconnected:
      return "disconnected";
  }
  return "unknown";
}

AgentRegistry::AgentRegistry(AgentRegistryOptions options, const common::TimeSource& time)
    : options_(options), time_(time) {}

AgentHealth AgentRegistry::HealthOf(const Entry& e, TimeNs now) const {
  if (!e.info.connected) return AgentHealth::kDisconnected;
  return now - e.info.last_seen_ns >
                 options_.stale_after_heartbeats * options_.heartbeat_interval_ns
             ? AgentHealth::kStale
             : AgentHealth::kHealthy;
}

void AgentRegistry::ForgetOld(TimeNs now) {
  for (auto it = agents_.begin(); it != agents_.end();) {
    if (!it->second.info.connected &&
        now - it->second.info.last_seen_ns > options_.forget_after_ns) {
      it = agents_.erase(it);
    } else {
      ++it;
    }
  }
}

std::string RankConflict::Reason(const std::string& job) const {
  std::string who;
  for (const std::string& c : claimants) common::StrAppend(&who, who.empty() ? "" : " and ", c);
  return common::StrCat("rank ", rank, " of job \"", job, "\" is claimed by ", claimants.size(),
                        " agents (", who, "): neither is captured; give each rank to one agent");
}

absl::StatusOr<bool> AgentRegistry::Connected(const v1::AgentHello& hello, std::string peer,
                                              std::shared_ptr<AgentControlStream> link) {
  std::shared_ptr<AgentControlStream> replaced;
  bool new_instance = false;
  {
    absl::MutexLock lock(&mu_);
    const TimeNs now = time_.Now();
    ForgetOld(now);
    auto it = agents_.find(hello.agent_id());
    if (it == agents_.end()) {
      if (agents_.size() >= options_.max_agents) {
        return absl::ResourceExhaustedError(common::StrCat("this coordinator already holds ",
                                                           agents_.size(),
                                                           " agents (max_agents); shard by job"));
      }
      it = agents_.emplace(hello.agent_id(), Entry()).first;
    }
    Entry& e = it->second;
    if (e.link && e.info.connected &&
        (hello.instance_id().empty() || hello.instance_id() != e.instance_id)) {
      return absl::AlreadyExistsError(
          common::StrCat("agent id \"", hello.agent_id(), "\" is already connected from ",
                         e.info.peer, " (host ", e.info.host, "); refused the same id from ", peer,
                         " (host ", hello.host(), "): give every agent its own --agent-id"));
    }
    new_instance = e.instance_id != hello.instance_id();
    e.instance_id = hello.instance_id();
    replaced = std::move(e.link);
    e.link = std::move(link);
    e.info.agent_id = hello.agent_id();
    e.info.host = hello.host();
    e.info.version = hello.version();
    e.info.peer = std::move(peer);
    e.info.connected = true;
    e.info.connected_ns = e.info.last_seen_ns = now;
    e.info.workers.assign(hello.workers().begin(), hello.workers().end());
  }
  if (replaced) replaced->Close();
  return new_instance;
}

bool AgentRegistry::IsCurrent(const std::string& agent_id, const AgentControlStream* link) const {
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(agent_id);
  return it != agents_.end() && it->second.link.get() == link && link != nullptr;
}

void AgentRegistry::Seen(const std::string& agent_id) {
  absl::MutexLock lock(&mu_);
  if (auto it = agents_.find(agent_id); it != agents_.end())
    it->second.info.last_seen_ns = time_.Now();
}

void AgentRegistry::WorkersChanged(const std::string& agent_id, const v1::WorkersChanged& workers) {
  absl::MutexLock lock(&mu_);
  if (auto it = agents_.find(agent_id); it != agents_.end()) {
    it->second.info.workers.assign(workers.workers().begin(), workers.workers().end());
    it->second.info.last_seen_ns = time_.Now();
  }
}

void AgentRegistry::Disconnected(const std::string& agent_id, const AgentControlStream* link) {
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(agent_id);
  if (it == agents_.end() || it->second.link.get() != link) return;
  it->second.link.reset();
  it->second.info.connected = false;
  it->second.info.last_seen_ns = time_.Now();
}

bool AgentRegistry::Send(const std::string& agent_id, const v1::CoordinatorMessage& message) {
  std::shared_ptr<AgentControlStream> link;
  {
    absl::MutexLock lock(&mu_);
    auto it = agents_.find(agent_id);
    if (it == agents_.end() || !it->second.link) return false;
    link = it->second.link;
  }
  return link->Send(message);
}

bool AgentRegistry::IsConnected(const std::string& agent_id) const {
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(agent_id);
  return it != agents_.end() && it->second.info.connected;
}

std::vector<AgentSnapshot> AgentRegistry::Snapshot() const {
  absl::MutexLock lock(&mu_);
  const TimeNs now = time_.Now();
  std::vector<AgentSnapshot> out;
  out.reserve(agents_.size());
  for (const auto& [id, e] : agents_) {
    // Gone long enough to be forgotten (the entry itself goes at the next connection).
    if (!e.info.connected && now - e.info.last_seen_ns > options_.forget_after_ns) continue;
    out.push_back(e.info);
    out.back().health = HealthOf(e, now);
  }
  return out;
}

std::vector<std::string> AgentRegistry::ConnectedIds() const {
  std::vector<std::string> ids;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, e] : agents_) {
    if (e.info.connected) ids.push_back(id);
  }
  return ids;
}

size_t AgentRegistry::ConnectedCount() const {
  absl::MutexLock lock(&mu_);
  return static_cast<size_t>(std::count_if(
      agents_.begin(), agents_.end(), [](const auto& kv) { return kv.second.info.connected; }));
}

std::map<std::pair<std::string, int32_t>, std::string> AgentRegistry::ServedRanks(
    const std::string& agent_id) const {
  std::map<std::pair<std::string, int32_t>, std::string> served;
  absl::MutexLock lock(&mu_);
  const auto it = agents_.find(agent_id);
  if (it == agents_.end() || !it->second.info.connected) return served;
  for (const v1::WorkerDescriptor& w : it->second.info.workers) {
    served.emplace(std::make_pair(w.job(), w.rank()),
                   w.host().empty() ? it->second.info.host : w.host());
  }
  return served;
}

absl::StatusOr<TargetSelection> AgentRegistry::SelectTargets(
    const std::string& job, const std::vector<int32_t>& ranks) const {
  const std::set<int32_t> wanted(ranks.begin(), ranks.end());
  // Every claim of every wanted rank, by agent (agents_ is ordered by id).
  std::map<int32_t, std::vector<std::pair<const Entry*, const v1::WorkerDescriptor*>>> claims;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, e] : agents_) {
    if (!e.info.connected) continue;
    for (const v1::WorkerDescriptor& w : e.info.workers) {
      if (w.job() != job || (!wanted.empty() && !wanted.count(w.rank()))) continue;
      auto& mine = claims[w.rank()];
      if (!mine.empty() && mine.back().first == &e)
        continue;  // an agent listing a rank twice claims it once
      mine.emplace_back(&e, &w);
    }
  }
  TargetSelection selection;
  std::map<std::string, CaptureTarget> by_agent;
  for (const auto& [rank, claimants] : claims) {
    if (claimants.size() > 1) {
      RankConflict& conflict = selection.conflicts.emplace_back();
      conflict.rank = rank;
      for (const auto& [e, w] : claimants) {
        conflict.claimants.push_back(
            common::StrCat(e->info.agent_id, " (", e->info.host, ", ", e->info.peer, ")"));
      }
      continue;
    }
    const Entry& e = *claimants.front().first;
    CaptureTarget& target = by_agent[e.info.agent_id];
    target.agent_id = e.info.agent_id;
    target.host = e.info.host;
    target.workers.push_back(*claimants.front().second);
  }
  for (auto& [id, target] : by_agent) selection.targets.push_back(std::move(target));
  if (claims.empty()) {
    return absl::NotFoundError(common::StrCat("no connected agent serves job \"", job, "\"",
                                              wanted.empty() ? "" : " with those ranks"));
  }
  std::string missing;
  int listed = 0;
  for (int32_t r : wanted) {
    if (claims.count(r)) continue;
    if (listed++ < 10) common::StrAppend(&missing, missing.empty() ? "" : ", ", r);
  }
  if (!missing.empty()) {
    return absl::NotFoundError(common::StrCat("ranks ", missing, listed > 10 ? ", ..." : "",
                                              " of job \"", job,
                                              "\" are not served by any connected agent"));
  }
  return selection;
}

}  // namespace podscope::coordinator
