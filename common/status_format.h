// absl::Status in fmt and spdlog: `spdlog::error("cannot start: {}", status)` writes the
// status's message, the words a person reads ("OK" for an OK status). The code's name
// (INVALID_ARGUMENT, ...) is left out: podscope's messages say what is wrong in words.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "fmt/format.h"

template <>
struct fmt::formatter<absl::Status> : fmt::formatter<std::string_view> {
  auto format(const absl::Status& status, fmt::format_context& ctx) const {
    const std::string message(status.message());
    return fmt::formatter<std::string_view>::format(status.ok() ? "OK" : std::string_view(message),
                                                    ctx);
  }
};
