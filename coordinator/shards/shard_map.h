// Coordinators sharded by job (docs/deploy.md): each job has exactly one owner among the replicas,
// chosen by rendezvous (highest random weight) hashing of (member, job). Every replica computes
// the same owner from the same member list, with nothing to agree on at run time, and a change
// of members moves only the jobs whose owner changed: adding a replica moves to it the jobs it
// now wins (about 1/N of them) and nothing else; removing one moves only its own.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace podscope::coordinator {

struct ShardMember {
  std::string name;  // stable: the StatefulSet pod's name ("podscope-coordinator-2")
  std::string rest;  // its REST URL, as peers reach it ("https://NAME.SERVICE.NS.svc:8443")
  std::string grpc;  // its agents' address, HOST:PORT, as agents reach it
  bool operator==(const ShardMember&) const = default;
};

// The weight of `member` for `job`: a stable 64-bit hash (the same on every machine and build).
uint64_t RendezvousWeight(std::string_view member, std::string_view job);

// A short stable tag of a member name (8 hex digits) that ids made by that member end with, so
// that no two shards ever make the same id (member names themselves may be too long for ids).
std::string ShardTag(std::string_view member);

// An immutable view of the members and which one this coordinator is.
class ShardMap {
 public:
  // Checks the members (names unique and well-formed, URLs and addresses well-formed, at most
  // 1024) and that `self` is one of them.
  static absl::StatusOr<ShardMap> Make(std::vector<ShardMember> members, std::string self);
  // One member, this coordinator: every job is its own (the unsharded case).
  static ShardMap Single(std::string self_name = "self");

  const ShardMember& OwnerOf(std::string_view job) const;
  // The member whose tag `id` ends with ("cap-...-1a2b3c4d": the shard that made it); null for
  // an id without a member's tag (an import's own name, an id from before sharding).
  const ShardMember* MakerOf(std::string_view id) const;
  bool Owns(std::string_view job) const { return &OwnerOf(job) == &members_[self_]; }
  const ShardMember& self() const { return members_[self_]; }
  const std::vector<ShardMember>& members() const { return members_; }  // sorted by name
  // The members other than this one.
  std::vector<ShardMember> peers() const;
  bool sharded() const { return members_.size() > 1; }

 private:
  ShardMap() = default;
  std::vector<ShardMember> members_;
  size_t self_ = 0;
  std::map<std::string, size_t, std::less<>> by_tag_;  // ShardTag(name) -> index in members_
};

// Parses a members file: {"members": [{"name": "...", "rest": "https://...", "grpc": "host:port"},
// ...]}. `origin` names the file in errors.
absl::StatusOr<std::vector<ShardMember>> ParseShardMembers(std::string_view json,
                                                           const std::string& origin);

}  // namespace podscope::coordinator
