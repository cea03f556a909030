#include "common/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace podscope::common {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t len = c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return len;
}

}  // namespace

JsonWriter& JsonWriter::String(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  buffer_.push_back('"');
  size_t run_start = 0;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      if (size_t len = Utf8SequenceLength(s, i); len > 0) {
        i += len;
        continue;
      }
    }
    buffer_.append(s.data() + run_start, i - run_start);
    switch (c) {
      case '"':
        buffer_.append("\\\"");
        break;
      case '\\':
        buffer_.append("\\\\");
        break;
      case '\n':
        buffer_.append("\\n");
        break;
      case '\r':
        buffer_.append("\\r");
        break;
      case '\t':
        buffer_.append("\\t");
        break;
      default:
        if (c >= 0x80) {
          buffer_.append("\\ufffd");
        } else {
          const char esc[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
          buffer_.append(esc, sizeof(esc));
        }
    }
    ++i;
    run_start = i;
  }
  buffer_.append(s.data() + run_start, s.size() - run_start);
  buffer_.push_back('"');
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  String(key);
  buffer_.push_back(':');
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t v) {
  char tmp[24];
  auto [end, ec] = std::to_chars(tmp, tmp + sizeof(tmp), v);
  buffer_.append(tmp, end);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t v) {
  char tmp[24];
  auto [end, ec] = std::to_chars(tmp, tmp + sizeof(tmp), v);
  buffer_.append(tmp, end);
  return *this;
}

JsonWriter& JsonWriter::Double(double v) {
  if (!std::isfinite(v)) return Raw("null");
  char tmp[32];
  auto [end, ec] = std::to_chars(tmp, tmp + sizeof(tmp), v);
  buffer_.append(tmp, end);
  return *this;
}

JsonWriter& JsonWriter::Fixed(double v, int decimals) {
  if (!std::isfinite(v)) return Raw("null");
  char tmp[64];
  auto [end, ec] = std::to_chars(tmp, tmp + sizeof(tmp), v, std::chars_format::fixed, decimals);
  buffer_.append(tmp, end);
  return *this;
}

JsonWriter& JsonWriter::MicrosFromNanos(int64_t ns) {
  // Exact decimal formatting; doubles would lose the nanoseconds of epoch timestamps.
  uint64_t magnitude = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  if (ns < 0) buffer_.push_back('-');
  Uint(magnitude / 1000);
  const auto frac = static_cast<unsigned>(magnitude % 1000);
  if (frac != 0) {
    const char digits[] = {'.', static_cast<char>('0' + frac / 100),
                           static_cast<char>('0' + frac / 10 % 10),
                           static_cast<char>('0' + frac % 10)};
    buffer_.append(digits, sizeof(digits));
  }
  return *this;
}

}  // namespace podscope::common
