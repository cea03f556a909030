// Length-prefixed frames on a byte stream (the probe <-> agent unix socket): a 4-byte
// little-endian payload length, then the payload. Both ends bound the frame size, so a corrupt
// or hostile length never makes anyone allocate gigabytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace podscope::common {

inline constexpr size_t kFrameHeaderBytes = 4;

// Appends one frame carrying `payload` to `out`. InvalidArgument when the payload is over
// `max_payload`.
absl::Status AppendFrame(std::string_view payload, size_t max_payload, std::string* out);

// Collects bytes as they arrive (in any pieces) and hands out whole frames in order.
class FrameReader {
 public:
  explicit FrameReader(size_t max_payload) : max_payload_(max_payload) {}

  void Append(std::string_view bytes) { buffer_.append(bytes); }
  // The next whole frame's payload; nullopt while it has not fully arrived. An error (a frame
  // over the bound) is final: the stream cannot be resynchronised.
  absl::StatusOr<std::optional<std::string>> Next();
  // Bytes received and not handed out yet.
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  const size_t max_payload_;
  std::string buffer_;
  size_t consumed_ = 0;
  bool failed_ = false;
};

}  // namespace podscope::common
