#include "common/string_table.h"

#include <cstring>
#include <random>

namespace podscope::common {
namespace {

uint64_t ProcessSeed() {
  static const uint64_t seed = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }();
  return seed;
}

uint64_t Mix(uint64_t h, uint64_t word) {
  constexpr uint64_t kMultiplier = 0x9e3779b97f4a7c15ULL;
  h = (h ^ word) * kMultiplier;
  return h ^ (h >> 29);
}

}  // namespace

size_t NameHash::operator()(std::string_view s) const {
  const char* p = s.data();
  size_t left = s.size();
  uint64_t h = Mix(ProcessSeed(), left);
  for (; left >= 8; p += 8, left -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    h = Mix(h, word);
  }
  if (left > 0) {
    uint64_t word = 0;
    std::memcpy(&word, p, left);
    h = Mix(h, word);
  }
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ULL;
  return static_cast<size_t>(h ^ (h >> 32));
}

StringTable::StringTable() { Intern(""); }

StringTable::StringTable(const StringTable& other) { CopyFrom(other); }

StringTable& StringTable::operator=(const StringTable& other) {
  if (this != &other) {
    storage_.clear();
    views_.clear();
    ids_.clear();
    payload_bytes_ = 0;
    CopyFrom(other);
  }
  return *this;
}

void StringTable::CopyFrom(const StringTable& other) {
  for (std::string_view s : other.views_) Intern(s);
}

NameId StringTable::Intern(std::string_view s) {
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  const std::string& stored = storage_.emplace_back(s);
  const auto id = static_cast<NameId>(views_.size());
  views_.push_back(stored);
  ids_.emplace(views_.back(), id);
  payload_bytes_ += s.size();
  return id;
}

NameId StringTable::Find(std::string_view s) const {
  auto it = ids_.find(s);
  return it == ids_.end() ? kNotFound : it->second;
}

}  // namespace podscope::common
