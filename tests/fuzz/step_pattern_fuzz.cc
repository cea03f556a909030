// Fuzz target for step patterns: a user's pattern (up to the first newline) meets a name from a
// trace (the rest). Compiling is bounded or a clear error; matching is linear and never crashes.
#include <string>

#include "common/step_pattern.h"
#include "tests/fuzz/fuzz_seeds.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string_view pattern = input.substr(0, newline);
  const std::string_view name =
      newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
  absl::StatusOr<podscope::common::StepPattern> compiled =
      podscope::common::StepPattern::Compile(pattern);
  if (!compiled.ok()) {
    if (compiled.status().message().empty()) __builtin_trap();  // every refusal says why
    return 0;
  }
  const podscope::common::StepPattern::Match m = compiled->Find(name);
  if (m.number && (!m.matched || *m.number < 0)) __builtin_trap();
  return 0;
}

namespace podscope::fuzz {

std::vector<std::string> Seeds(const std::vector<std::string>&) {
  return {"^(ProfilerStep#|[Ss]tep[ _#]?)([0-9]+)$\nProfilerStep#12",
          "train_step_(\\d+)\nepoch 3 train_step_41 (fwd)",
          "(a|b)*c\n" + std::string(4096, 'a'),
          "^(a|a)*$\n" + std::string(30, 'a') + "b",
          "((a{10}){10}){10}\naaaa",
          "([\nx"};
}

}  // namespace podscope::fuzz
