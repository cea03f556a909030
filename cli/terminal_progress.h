// A one-line progress bar on stderr, shown only when stderr is a terminal.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace podscope::cli {

// Owned by one CLI command; Update may be called from any thread but not concurrently
// (callers serialise, as LoadCapture does).
class TerminalProgress {
 public:
  explicit TerminalProgress(std::string label);
  ~TerminalProgress();

  // Redraws "label [#####     ] done/total detail" at most every 50 ms (and on completion).
  void Update(uint64_t done, uint64_t total, std::string_view detail = {});
  // Clears the line.
  void Finish();
  bool enabled() const { return enabled_; }

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  int64_t last_draw_ns_ = 0;
};

// "1.2 MB", "345.6 MB", "2.1 GB".
std::string HumanBytes(uint64_t bytes);

}  // namespace podscope::cli
