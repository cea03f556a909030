#include "coordinator/shards/shard_membership.h"

#include <fstream>

#include "common/status_macros.h"
#include "common/str_util.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {
namespace {

absl::StatusOr<ShardMap> LoadMap(const ShardOptions& options) {
  std::ifstream in(options.members_file, std::ios::binary);
  if (!in)
    return absl::NotFoundError(
        common::StrCat("cannot read the shard members file ", options.members_file));
  std::string text((1 << 20) + 1, '\0');  // ParseShardMembers refuses more than 1 MiB
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  ASSIGN_OR_RETURN(std::vector<ShardMember> members, ParseShardMembers(text, options.members_file));
  absl::StatusOr<ShardMap> map = ShardMap::Make(std::move(members), options.self);
  if (!map.ok())
    return absl::InvalidArgumentError(
        common::StrCat(options.members_file, ": ", map.status().message()));
  return map;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardMembership>> ShardMembership::Open(ShardOptions options) {
  if (options.members_file.empty()) {
    return std::unique_ptr<ShardMembership>(new ShardMembership(
        options, std::make_shared<const ShardMap>(
                     ShardMap::Single(options.self.empty() ? "self" : options.self))));
  }
  if (options.self.empty()) {
    return absl::InvalidArgumentError(
        "shards.members_file is set, but not this replica's name (--shard-name or shards.self)");
  }
  ASSIGN_OR_RETURN(ShardMap map, LoadMap(options));
  return std::unique_ptr<ShardMembership>(
      new ShardMembership(std::move(options), std::make_shared<const ShardMap>(std::move(map))));
}

ShardMembership::~ShardMembership() { StopWatching(); }

void ShardMembership::StopWatching() {
  {
    absl::MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  if (watcher_.joinable()) watcher_.join();
}

std::shared_ptr<const ShardMap> ShardMembership::current() const {
  absl::MutexLock lock(&mu_);
  return map_;
}

absl::StatusOr<bool> ShardMembership::Reload() {
  if (options_.members_file.empty()) return false;
  absl::MutexLock reload_lock(&reload_mu_);
  ASSIGN_OR_RETURN(ShardMap loaded, LoadMap(options_));
  auto next = std::make_shared<const ShardMap>(std::move(loaded));
  std::shared_ptr<const ShardMap> before;
  {
    absl::MutexLock lock(&mu_);
    if (map_->members() == next->members()) return false;
    before = map_;
    map_ = next;
  }
  for (const Listener& listener : listeners_) listener(*before, *next);
  return true;
}

void ShardMembership::OnChange(Listener listener) { listeners_.push_back(std::move(listener)); }

void ShardMembership::StartWatching() {
  if (options_.members_file.empty() || watcher_.joinable()) return;
  watcher_ = std::thread([this] {
    std::string last_error;
    const absl::Duration interval = absl::Milliseconds(options_.reload_interval_ms);
    while (true) {
      {
        absl::MutexLock lock(&stop_mu_);
        if (stop_mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) return;
      }
      absl::StatusOr<bool> changed = Reload();
      if (!changed.ok()) {
        // Once per distinct problem: a bad file stays bad for many intervals.
        if (std::string(changed.status().message()) != last_error) {
          last_error = std::string(changed.status().message());
          spdlog::error("shards: {}; keeping the {} members in force", last_error,
                        current()->members().size());
        }
      } else {
        last_error.clear();
        if (*changed) {
          std::string names;
          for (const ShardMember& m : current()->members())
            common::StrAppend(&names, names.empty() ? "" : ", ", m.name);
          spdlog::info("shards: members are now {}", names);
        }
      }
    }
  });
}

}  // namespace podscope::coordinator
