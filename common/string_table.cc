#include "common/string_table.h"

#include <cstring>
#include <random>

namespace podscope::common {
namespace {

uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

uint64_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The two halves of a full 64x64 product, folded: every input bit reaches many output bits.
uint64_t Fold(uint64_t a, uint64_t b) {
  const unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
}

constexpr uint64_t kOdd1 = 0x9e3779b97f4a7c15ULL;  // the golden ratio's bits
constexpr uint64_t kOdd2 = 0xc2b2ae3d27d4eb4fULL;

// Secret per process, mixed into both operands of every multiplication: no block of a name can
// be chosen to zero a product (and so to erase what came before it) without knowing them.
struct Keys {
  uint64_t start, block, tail;
};

const Keys& ProcessKeys() {
  static const Keys keys = [] {
    std::random_device device;
    const auto draw = [&device] { return (static_cast<uint64_t>(device()) << 32) ^ device(); };
    return Keys{draw(), draw(), draw()};
  }();
  return keys;
}

}  // namespace

size_t NameHash::operator()(std::string_view s) const noexcept {
  const Keys& keys = ProcessKeys();
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = keys.start ^ (n * kOdd1);
  // The running hash enters each step through the multiplication and around it, so that no one
  // block can cancel what came before it.
  for (; n > 16; n -= 16, p += 16) h = Fold(Load64(p) ^ h, Load64(p + 8) ^ keys.block) ^ (h >> 17);
  uint64_t a = 0, b = 0;
  if (n >= 8) {
    a = Load64(p);
    b = Load64(p + n - 8);
  } else if (n >= 4) {
    a = Load32(p);
    b = Load32(p + n - 4);
  } else if (n > 0) {
    a = (static_cast<uint64_t>(static_cast<unsigned char>(p[0])) << 16) |
        (static_cast<uint64_t>(static_cast<unsigned char>(p[n / 2])) << 8) |
        static_cast<unsigned char>(p[n - 1]);
  }
  return Fold(a ^ h, b ^ keys.tail) ^ h;
}

StringTable::StringTable() { Intern(""); }

StringTable::StringTable(const StringTable& other) { CopyFrom(other); }

StringTable& StringTable::operator=(const StringTable& other) {
  if (this != &other) {
    storage_.clear();
    views_.clear();
    ids_.clear();
    recent_.fill(kEmptyName);
    payload_bytes_ = 0;
    CopyFrom(other);
  }
  return *this;
}

void StringTable::CopyFrom(const StringTable& other) {
  for (std::string_view s : other.views_) Intern(s);
}

size_t StringTable::RecentSlot(std::string_view s) {
  const char* p = s.data();
  const size_t n = s.size();
  uint64_t key = n;
  if (n >= 8) {
    key ^= Load64(p) ^ (Load64(p + n - 8) * kOdd1) ^ (Load64(p + n / 2 - 4) * kOdd2);
  } else if (n > 0) {
    key ^= (static_cast<uint64_t>(static_cast<unsigned char>(p[0])) << 8) ^
           (static_cast<uint64_t>(static_cast<unsigned char>(p[n - 1])) << 16);
  }
  return static_cast<size_t>((key * kOdd1) >> 55);  // 9 bits: recent_'s 512 slots
}

NameId StringTable::Intern(std::string_view s) {
  NameId& recent = recent_[RecentSlot(s)];
  // Bounds first: a table moved from keeps its guesses but not its names.
  if (recent < views_.size() && views_[recent] == s) return recent;
  auto it = ids_.find(s);
  if (it != ids_.end()) {
    recent = it->second;
    return it->second;
  }
  const std::string& stored = storage_.emplace_back(s);
  const auto id = static_cast<NameId>(views_.size());
  views_.push_back(stored);
  ids_.emplace(views_.back(), id);
  payload_bytes_ += s.size();
  recent = id;
  return id;
}

NameId StringTable::Find(std::string_view s) const {
  auto it = ids_.find(s);
  return it == ids_.end() ? kNotFound : it->second;
}

}  // namespace podscope::common
