#include "common/step_pattern.h"

#include <re2/re2.h>

#include <vector>

#include "common/str_util.h"

namespace podscope::common {

absl::StatusOr<StepPattern> StepPattern::Compile(std::string_view pattern) {
  if (pattern.size() > kMaxPatternBytes) {
    return absl::InvalidArgumentError(StrCat("step pattern is ", pattern.size(), " bytes; at most ",
                                             kMaxPatternBytes, " are allowed"));
  }
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(kMaxProgramBytes);
  auto re = std::make_shared<const RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) {
    return absl::InvalidArgumentError(
        StrCat("step pattern \"", pattern, "\" is not a valid regex (RE2 syntax): ", re->error()));
  }
  return StepPattern(std::move(re));
}

StepPattern::Match StepPattern::Find(std::string_view name) const {
  const int groups = re_->NumberOfCapturingGroups();
  std::vector<re2::StringPiece> found(static_cast<size_t>(groups) + 1);
  Match match;
  match.matched = re_->Match(re2::StringPiece(name.data(), name.size()), 0, name.size(),
                             RE2::UNANCHORED, found.data(), groups + 1);
  if (!match.matched) return match;
  for (int g = groups; g >= 1; --g) {
    const re2::StringPiece digits = found[static_cast<size_t>(g)];
    if (digits.empty() || digits.size() > 18) continue;
    int64_t value = 0;
    bool all_digits = true;
    for (const char c : digits) {
      if (c < '0' || c > '9') {
        all_digits = false;
        break;
      }
      value = value * 10 + (c - '0');
    }
    if (!all_digits) continue;
    match.number = value;
    break;
  }
  return match;
}

const std::string& StepPattern::pattern() const { return re_->pattern(); }

}  // namespace podscope::common
