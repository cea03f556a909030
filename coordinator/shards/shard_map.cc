#include "coordinator/shards/shard_map.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/host_port.h"
#include "common/json_config.h"
#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::coordinator {
namespace {

constexpr size_t kMaxMembers = 1024;

// FNV-1a over the bytes, then MurmurHash3's 64-bit finaliser so that names differing in one
// character (shard-1, shard-2) get unrelated weights.
uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

uint64_t Fnv1a(std::string_view bytes, uint64_t h) {
  for (const unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_';
  });
}

bool ValidRestUrl(std::string_view url) {
  std::string_view rest;
  if (url.starts_with("https://")) {
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else {
    return false;
  }
  return rest.find('/') == std::string_view::npos && common::ParseHostPort(rest).ok();
}

}  // namespace

uint64_t RendezvousWeight(std::string_view member, std::string_view job) {
  uint64_t h = Fnv1a(member, 0xcbf29ce484222325ULL);
  h = Fnv1a(std::string_view("\0", 1), h);
  return Mix(Fnv1a(job, h));
}

std::string ShardTag(std::string_view member) {
  static constexpr char kHex[] = "0123456789abcdef";
  const uint64_t h = Mix(Fnv1a(member, 0xcbf29ce484222325ULL));
  std::string tag;
  for (int shift = 28; shift >= 0; shift -= 4) tag.push_back(kHex[(h >> shift) & 15]);
  return tag;
}

absl::StatusOr<ShardMap> ShardMap::Make(std::vector<ShardMember> members, std::string self) {
  if (members.empty()) return absl::InvalidArgumentError("shards: no members");
  if (members.size() > kMaxMembers) {
    return absl::InvalidArgumentError(
        common::StrCat("shards: ", members.size(), " members, at most ", kMaxMembers));
  }
  std::sort(members.begin(), members.end(),
            [](const ShardMember& a, const ShardMember& b) { return a.name < b.name; });
  for (size_t i = 0; i < members.size(); ++i) {
    const ShardMember& m = members[i];
    if (!ValidName(m.name)) {
      return absl::InvalidArgumentError(common::StrCat(
          "shards: member name \"", m.name, "\" is not 1..253 letters, digits, '-', '.' or '_'"));
    }
    if (i > 0 && members[i - 1].name == m.name) {
      return absl::InvalidArgumentError(
          common::StrCat("shards: member ", m.name, " is listed twice"));
    }
    if (!ValidRestUrl(m.rest)) {
      return absl::InvalidArgumentError(common::StrCat("shards: member ", m.name, ": rest \"",
                                                       m.rest, "\" is not http[s]://HOST:PORT"));
    }
    if (absl::StatusOr<common::HostPort> grpc = common::ParseHostPort(m.grpc); !grpc.ok()) {
      return absl::InvalidArgumentError(
          common::StrCat("shards: member ", m.name, ": grpc ", grpc.status().message()));
    }
  }
  // Ids carry their shard's tag: two members must not share one (about one chance in 10^7 for
  // a thousand members; renaming one fixes it).
  std::map<std::string, std::string> tags;
  for (const ShardMember& m : members) {
    const auto [at, fresh] = tags.emplace(ShardTag(m.name), m.name);
    if (!fresh) {
      return absl::InvalidArgumentError(common::StrCat(
          "shards: members ", at->second, " and ", m.name, " have the same id tag; rename one"));
    }
  }
  ShardMap map;
  const auto it = std::find_if(members.begin(), members.end(),
                               [&](const ShardMember& m) { return m.name == self; });
  if (it == members.end()) {
    std::string names;
    for (const ShardMember& m : members)
      common::StrAppend(&names, names.empty() ? "" : ", ", m.name);
    return absl::InvalidArgumentError(common::StrCat("shards: this coordinator (--shard-name \"",
                                                     self, "\") is not among the members (", names,
                                                     ")"));
  }
  map.self_ = static_cast<size_t>(it - members.begin());
  map.members_ = std::move(members);
  for (size_t i = 0; i < map.members_.size(); ++i) map.by_tag_[ShardTag(map.members_[i].name)] = i;
  return map;
}

ShardMap ShardMap::Single(std::string self_name) {
  ShardMap map;
  map.members_.push_back({.name = std::move(self_name)});
  return map;
}

const ShardMember* ShardMap::MakerOf(std::string_view id) const {
  constexpr size_t kTagLength = 8;
  if (id.size() <= kTagLength || id[id.size() - kTagLength - 1] != '-') return nullptr;
  const auto it = by_tag_.find(id.substr(id.size() - kTagLength));
  return it == by_tag_.end() ? nullptr : &members_[it->second];
}

const ShardMember& ShardMap::OwnerOf(std::string_view job) const {
  size_t best = 0;
  uint64_t best_weight = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    const uint64_t w = RendezvousWeight(members_[i].name, job);
    // Ties (astronomically rare) go to the smaller name, the same on every replica.
    if (i == 0 || w > best_weight) {
      best = i;
      best_weight = w;
    }
  }
  return members_[best];
}

std::vector<ShardMember> ShardMap::peers() const {
  std::vector<ShardMember> out;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (i != self_) out.push_back(members_[i]);
  }
  return out;
}

absl::StatusOr<std::vector<ShardMember>> ParseShardMembers(std::string_view json,
                                                           const std::string& origin) {
  ASSIGN_OR_RETURN(boost::json::object root, common::ParseJsonConfig(json, origin));
  std::vector<ShardMember> members;
  try {
    const common::ConfigSection top(root, "", {"members"});
    const boost::json::value* list = top.Raw("members");
    if (list == nullptr || !list->is_array()) throw top.Bad("members", "is not a list of members");
    if (list->get_array().size() > kMaxMembers) {
      throw top.Bad("members", common::StrCat("has ", list->get_array().size(),
                                              " members, at most ", kMaxMembers));
    }
    for (const boost::json::value& item : list->get_array()) {
      if (!item.is_object())
        throw top.Bad("members", "holds something that is not a member object");
      const common::ConfigSection m(item.get_object(), "members[]", {"name", "rest", "grpc"});
      ShardMember member;
      m.String("name", &member.name, 253);
      m.String("rest", &member.rest, 512);
      m.String("grpc", &member.grpc, 512);
      members.push_back(std::move(member));
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(common::StrCat(origin, ": ", e.what()));
  }
  return members;
}

}  // namespace podscope::coordinator
