#include "common/json_writer.h"

#include <charconv>
#include <cmath>
#include <system_error>

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

void JsonWriter::Flush() {
  buffer_.append(staging_, staged_);
  staged_ = 0;
}

void JsonWriter::PutQuoted(bool key, std::string_view s, std::string_view tail) {
  char* p = Room(3);
  p = key ? PutKeySeparator(p) : PutValueSeparator(p);
  *p++ = '"';
  Commit(p);
  size_t plain = 0;
  while (plain < s.size() && IsPlain(static_cast<unsigned char>(s[plain]))) ++plain;
  if (plain == s.size()) {
    Append(s);
  } else {
    Flush();
    AppendEscaped(s, plain);
  }
  p = Room(3);
  *p++ = '"';
  for (const char c : tail) *p++ = c;
  Commit(p);
}

// s, escaped, into buffer_ directly (the staging area is empty); s[0, plain) needs no escaping.
void JsonWriter::AppendEscaped(std::string_view s, size_t plain) {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t run_start = 0;
  for (size_t i = plain; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (IsPlain(c)) {
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
}

JsonWriter& JsonWriter::Int(int64_t v) {
  char* p = PutValueSeparator(Room(2 + 20));
  Commit(std::to_chars(p, p + 20, v).ptr);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t v) {
  char* p = PutValueSeparator(Room(2 + 20));
  Commit(std::to_chars(p, p + 20, v).ptr);
  return *this;
}

JsonWriter& JsonWriter::Double(double v) {
  if (!std::isfinite(v)) return Null();
  char* p = PutValueSeparator(Room(2 + 32));
  Commit(std::to_chars(p, p + 32, v).ptr);
  return *this;
}

JsonWriter& JsonWriter::Fixed(double v, int decimals) {
  if (!std::isfinite(v)) return Null();
  // Room for the largest double (309 digits) with the decimals callers ask for.
  constexpr size_t kLongest = 400;
  char* p = PutValueSeparator(Room(2 + kLongest));
  const auto [end, ec] = std::to_chars(p, p + kLongest, v, std::chars_format::fixed, decimals);
  if (ec != std::errc()) {  // `decimals` beyond any use
    Commit(p);
    Append("null");
    return *this;
  }
  Commit(end);
  return *this;
}

JsonWriter& JsonWriter::MicrosFromNanos(int64_t ns) {
  // Exact decimal formatting; doubles would lose the nanoseconds of epoch timestamps.
  char* p = PutValueSeparator(Room(2 + 1 + 20 + 4));
  const uint64_t magnitude = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  if (ns < 0) *p++ = '-';
  p = std::to_chars(p, p + 20, magnitude / 1000).ptr;
  const auto frac = static_cast<unsigned>(magnitude % 1000);
  if (frac != 0) {
    *p++ = '.';
    *p++ = static_cast<char>('0' + frac / 100);
    *p++ = static_cast<char>('0' + frac / 10 % 10);
    *p++ = static_cast<char>('0' + frac % 10);
  }
  Commit(p);
  return *this;
}

}  // namespace podscope::common
