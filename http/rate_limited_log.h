// Logs at most kLinesPerSecond lines a second for one kind of event and says how many it
// dropped, so that a flood of bad requests or connections cannot flood the log.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "spdlog/spdlog.h"

namespace podscope::http {

// Any thread.
class RateLimitedLog {
 public:
  static constexpr int kLinesPerSecond = 5;

  explicit RateLimitedLog(std::string prefix) : prefix_(std::move(prefix)) {}

  template <typename... Args>
  void Warn(fmt::format_string<Args...> format, Args&&... args) {
    const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
    uint64_t dropped = 0;
    {
      absl::MutexLock lock(&mu_);
      if (second != second_) {
        dropped = dropped_;
        second_ = second;
        lines_ = 0;
        dropped_ = 0;
      }
      if (lines_ >= kLinesPerSecond) {
        ++dropped_;
        return;
      }
      ++lines_;
    }
    if (dropped > 0) spdlog::warn("{}: {} more such lines were not logged", prefix_, dropped);
    spdlog::warn(format, std::forward<Args>(args)...);
  }

 private:
  const std::string prefix_;
  absl::Mutex mu_;
  int64_t second_ ABSL_GUARDED_BY(mu_) = 0;
  int lines_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podscope::http
