#include "common/string_table.h"

namespace podscope::common {

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
