#include "cli/terminal_progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "fmt/format.h"

namespace podscope::cli {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TerminalProgress::TerminalProgress(std::string label)
    : label_(std::move(label)), enabled_(isatty(STDERR_FILENO) == 1) {}

TerminalProgress::~TerminalProgress() { Finish(); }

void TerminalProgress::Update(uint64_t done, uint64_t total, std::string_view detail) {
  if (!enabled_) return;
  const int64_t now = NowNs();
  if (done < total && now - last_draw_ns_ < 50'000'000) return;
  last_draw_ns_ = now;
  constexpr int kWidth = 30;
  const int filled = total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, ' ');
  std::fprintf(stderr, "\r\033[K%s [%s] %llu/%llu %.*s", label_.c_str(), bar.c_str(),
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
               static_cast<int>(detail.size()), detail.data());
  std::fflush(stderr);
  drawn_ = true;
}

void TerminalProgress::Finish() {
  if (enabled_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes < 1000) return fmt::format("{} B", bytes);
  if (bytes < 1000 * 1000) return fmt::format("{:.1f} kB", bytes / 1e3);
  if (bytes < 1000ull * 1000 * 1000) return fmt::format("{:.1f} MB", bytes / 1e6);
  return fmt::format("{:.2f} GB", bytes / 1e9);
}

}  // namespace podscope::cli
