// Interned strings of one worker trace (kernel names, op names, dtypes, ...).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace podscope::common {

using NameId = uint32_t;

// Id 0 is always the empty string, so a default-initialised NameId means "no name".
inline constexpr NameId kEmptyName = 0;

// The table's hash of a name: kernel names run to hundreds of bytes, and the standard library's
// byte hash (which this Abseil build uses for strings) cost more than finding the name. Sixteen
// bytes a step, keyed by secrets drawn per process so that names cannot be crafted to collide.
struct NameHash {
  size_t operator()(std::string_view s) const noexcept;
};

// Owns its strings; ids are dense and stable for the table's lifetime. Not thread-safe:
// one importer or decoder fills it, analyses read it afterwards.
class StringTable {
 public:
  StringTable();
  StringTable(const StringTable& other);
  StringTable& operator=(const StringTable& other);
  StringTable(StringTable&&) noexcept = default;
  StringTable& operator=(StringTable&&) noexcept = default;

  // Returns the id of `s`, adding it when new.
  NameId Intern(std::string_view s);
  // Returns the id of `s` if present, else std::nullopt-like kNotFound.
  static constexpr NameId kNotFound = UINT32_MAX;
  NameId Find(std::string_view s) const;

  std::string_view Get(NameId id) const { return views_[id]; }
  bool Contains(NameId id) const { return id < views_.size(); }
  size_t size() const { return views_.size(); }
  // Total bytes of string payload, for memory accounting.
  size_t payload_bytes() const { return payload_bytes_; }

 private:
  void CopyFrom(const StringTable& other);
  // Where `s` is looked for among the recently interned names.
  static size_t RecentSlot(std::string_view s);

  std::deque<std::string> storage_;  // deque: stable addresses for the views below
  std::vector<std::string_view> views_;
  absl::flat_hash_map<std::string_view, NameId, NameHash> ids_;
  // Ids of names interned lately, by a key of a few of their bytes: a trace names the same few
  // hundred kernels and calls again and again, and comparing a candidate costs far less than
  // hashing a long name. A slot is only a guess, checked against the stored name; 0 (the empty
  // name) is a guess like any other.
  std::array<NameId, 512> recent_{};
  size_t payload_bytes_ = 0;
};

}  // namespace podscope::common
