// A user-supplied step-marker pattern (`--step-pattern`, `step_pattern=`, PODSCOPE_STEP_PATTERN).
// Patterns come from users and names from traces, so matching runs on RE2: time linear in the
// name whatever the pattern, no recursion (std::regex overflowed the stack on a long name and
// backtracked exponentially on `^(a|a)*$`), and a bounded pattern and program size.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace re2 {
class RE2;
}

namespace podscope::common {

class StepPattern {
 public:
  static constexpr size_t kMaxPatternBytes = 512;
  static constexpr int64_t kMaxProgramBytes = 1 << 20;  // RE2's compiled program and DFA cache

  // RE2 syntax. An error (too long, too large, not valid RE2) names the pattern and the reason.
  static absl::StatusOr<StepPattern> Compile(std::string_view pattern);

  struct Match {
    bool matched = false;
    // The last capture group that is all digits (1..18 of them); none when no group is.
    std::optional<int64_t> number;
  };
  // Searches anywhere in `name` (anchor with ^ and $). Thread-safe.
  Match Find(std::string_view name) const;

  const std::string& pattern() const;

 private:
  explicit StepPattern(std::shared_ptr<const re2::RE2> re) : re_(std::move(re)) {}
  std::shared_ptr<const re2::RE2> re_;  // shared: copies of the pattern match concurrently
};

}  // namespace podscope::common
