// A protobuf encoder for writers that stream: fields are appended to one buffer, and a nested
// message's length is filled in when it ends (as a 4-byte varint, which every protobuf decoder
// reads), so nothing is built twice. Enough for Perfetto's trace format; not a general library.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace podscope::common {

class ProtoWriter {
 public:
  std::string& buffer() { return buffer_; }
  size_t size() const { return buffer_.size(); }
  void Clear() { buffer_.clear(); }

  void Varint(uint32_t field, uint64_t value) {
    Tag(field, 0);
    Raw(value);
  }
  void Int(uint32_t field, int64_t value) { Varint(field, static_cast<uint64_t>(value)); }
  void Fixed64(uint32_t field, uint64_t value) {
    Tag(field, 1);
    char bytes[8];
    std::memcpy(bytes, &value, 8);  // little-endian, as the wire format is
    buffer_.append(bytes, 8);
  }
  void Bytes(uint32_t field, std::string_view value) {
    Tag(field, 2);
    Raw(value.size());
    buffer_.append(value);
  }

  // Opens a nested message; pass what it returns to End. Messages nest; each is under 256 MiB.
  size_t Begin(uint32_t field) {
    Tag(field, 2);
    buffer_.append(kLengthBytes, '\0');
    return buffer_.size();
  }
  void End(size_t begun) {
    size_t length = buffer_.size() - begun;
    char* p = buffer_.data() + begun - kLengthBytes;
    for (size_t i = 0; i < kLengthBytes; ++i) {
      p[i] = static_cast<char>((length & 0x7f) | (i + 1 < kLengthBytes ? 0x80 : 0));
      length >>= 7;
    }
  }

 private:
  static constexpr size_t kLengthBytes = 4;

  void Tag(uint32_t field, uint32_t wire_type) { Raw((uint64_t{field} << 3) | wire_type); }
  void Raw(uint64_t value) {
    while (value >= 0x80) {
      buffer_.push_back(static_cast<char>((value & 0x7f) | 0x80));
      value >>= 7;
    }
    buffer_.push_back(static_cast<char>(value));
  }

  std::string buffer_;
};

}  // namespace podscope::common
