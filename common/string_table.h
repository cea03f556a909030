// Interned strings of one worker trace (kernel names, op names, dtypes, ...).
#pragma once

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

  std::deque<std::string> storage_;  // deque: stable addresses for the views below
  std::vector<std::string_view> views_;
  absl::flat_hash_map<std::string_view, NameId> ids_;
  size_t payload_bytes_ = 0;
};

}  // namespace podscope::common
