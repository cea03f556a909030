#include "common/frame_codec.h"

#include "common/str_util.h"

namespace podscope::common {

absl::Status AppendFrame(std::string_view payload, size_t max_payload, std::string* out) {
  if (payload.size() > max_payload) {
    return absl::InvalidArgumentError(
        StrCat("a frame of ", payload.size(), " bytes is over the bound of ", max_payload));
  }
  const uint32_t n = static_cast<uint32_t>(payload.size());
  const char header[kFrameHeaderBytes] = {
      static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
      static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
  out->append(header, kFrameHeaderBytes);
  out->append(payload);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> FrameReader::Next() {
  if (failed_) return absl::DataLossError("the frame stream broke earlier");
  if (buffered() < kFrameHeaderBytes) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + consumed_);
  const uint32_t n =
      uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  if (n > max_payload_) {
    failed_ = true;
    return absl::DataLossError(
        StrCat("a frame announces ", n, " bytes, over the bound of ", max_payload_));
  }
  if (buffered() < kFrameHeaderBytes + n) return std::nullopt;
  std::string payload = buffer_.substr(consumed_ + kFrameHeaderBytes, n);
  consumed_ += kFrameHeaderBytes + n;
  // Compact once the consumed prefix dominates, so the buffer stays about one frame long.
  if (consumed_ > 4096 && consumed_ * 2 > buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  return std::optional<std::string>(std::move(payload));
}

}  // namespace podscope::common
