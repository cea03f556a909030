// A minimal streaming JSON writer: appends to a string buffer that the caller drains.
// Used where output is large (trace export) or must be byte-stable (CLI JSON), so no DOM.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace podscope::common {

// Not thread-safe. The caller tracks commas with the `first` flags it keeps; the writer only
// formats values correctly.
class JsonWriter {
 public:
  std::string& buffer() { return buffer_; }
  size_t size() const { return buffer_.size(); }
  void Clear() { buffer_.clear(); }

  JsonWriter& Raw(std::string_view text) {
    buffer_.append(text);
    return *this;
  }
  JsonWriter& Char(char c) {
    buffer_.push_back(c);
    return *this;
  }
  // A quoted, escaped string (invalid UTF-8 bytes are replaced by U+FFFD).
  JsonWriter& String(std::string_view s);
  // `"key":`
  JsonWriter& Key(std::string_view key);
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  // A finite double in shortest round-trip form; non-finite values become null.
  JsonWriter& Double(double v);
  // Fixed-point with `decimals` digits (e.g. percentages rounded as documented).
  JsonWriter& Fixed(double v, int decimals);
  // Nanoseconds as microseconds with three decimals: 1234567 -> 1234.567, exactly.
  JsonWriter& MicrosFromNanos(int64_t ns);
  JsonWriter& Bool(bool v) { return Raw(v ? "true" : "false"); }

 private:
  std::string buffer_;
};

}  // namespace podscope::common
