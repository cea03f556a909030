// String helpers. Debian's abseil is built with its own absl::string_view (not an alias of
// std::string_view), so absl's string utilities do not accept std::string_view; these small
// replacements do, and format numbers through fmt.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "fmt/format.h"

namespace podscope::common {

namespace str_internal {
template <typename T>
void AppendPiece(std::string& out, const T& piece) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    out.append(std::string_view(piece));
  } else if constexpr (requires {
                         piece.data();
                         piece.size();
                       }) {
    out.append(piece.data(), piece.size());  // absl::string_view (e.g. Status::message())
  } else if constexpr (std::is_same_v<T, char>) {
    out.push_back(piece);
  } else {
    fmt::format_to(std::back_inserter(out), "{}", piece);
  }
}
}  // namespace str_internal

// Concatenates strings and numbers: StrCat("rank ", 3, ": ", name).
template <typename... Pieces>
std::string StrCat(const Pieces&... pieces) {
  std::string out;
  (str_internal::AppendPiece(out, pieces), ...);
  return out;
}

template <typename... Pieces>
void StrAppend(std::string* out, const Pieces&... pieces) {
  (str_internal::AppendPiece(*out, pieces), ...);
}

// "1 file", "3 files": a count with its noun, plural unless the count is one. `plural` is for
// nouns that do not take an s ("1 entry", "2 entries").
inline std::string Counted(uint64_t n, std::string_view noun, std::string_view plural = {}) {
  if (n == 1) return StrCat(n, " ", noun);
  return plural.empty() ? StrCat(n, " ", noun, "s") : StrCat(n, " ", plural);
}

inline bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

inline std::string_view StripWhitespace(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Splits on every `sep`; "a,,b" gives {"a", "", "b"}, "" gives {""}.
inline std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t from = 0;
  for (size_t at = s.find(sep); at != std::string_view::npos; at = s.find(sep, from)) {
    parts.push_back(s.substr(from, at - from));
    from = at + 1;
  }
  parts.push_back(s.substr(from));
  return parts;
}

}  // namespace podscope::common
