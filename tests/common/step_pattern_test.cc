#include "common/step_pattern.h"

#include <gtest/gtest.h>

#include <string>

namespace podscope::common {
namespace {

TEST(StepPatternTest, TheLastGroupOfDigitsIsTheStepNumber) {
  const absl::StatusOr<StepPattern> profiler =
      StepPattern::Compile("^(ProfilerStep#|[Ss]tep[ _#]?)([0-9]+)$");
  ASSERT_TRUE(profiler.ok()) << profiler.status();
  EXPECT_EQ(profiler->Find("ProfilerStep#12").number, 12);
  EXPECT_EQ(profiler->Find("step_7").number, 7);
  EXPECT_FALSE(profiler->Find("ProfilerStep#12 extra").matched);

  const absl::StatusOr<StepPattern> one_group = StepPattern::Compile(R"(train_step_(\d+))");
  ASSERT_TRUE(one_group.ok());
  const StepPattern::Match m =
      one_group->Find("epoch 3 train_step_41 (fwd)");  // searched, not anchored
  EXPECT_TRUE(m.matched);
  EXPECT_EQ(m.number, 41);

  const absl::StatusOr<StepPattern> no_group = StepPattern::Compile("^iteration$");
  ASSERT_TRUE(no_group.ok());
  EXPECT_TRUE(no_group->Find("iteration").matched);
  EXPECT_EQ(no_group->Find("iteration").number, std::nullopt);
  // More than 18 digits cannot be a step number (it would overflow).
  const absl::StatusOr<StepPattern> digits = StepPattern::Compile("^s([0-9]+)$");
  ASSERT_TRUE(digits.ok());
  EXPECT_TRUE(digits->Find("s1234567890123456789").matched);
  EXPECT_EQ(digits->Find("s1234567890123456789").number, std::nullopt);
  EXPECT_EQ(digits->Find("s123456789012345678").number, 123456789012345678);
}

// What std::regex could not survive: recursion over a long name (stack overflow) and
// exponential backtracking. RE2 is linear in the name; both return at once.
TEST(StepPatternTest, HostilePatternsAndNamesAreLinear) {
  const absl::StatusOr<StepPattern> star = StepPattern::Compile("(a|b)*c");
  ASSERT_TRUE(star.ok());
  EXPECT_FALSE(star->Find(std::string(40'000, 'a')).matched);
  EXPECT_TRUE(star->Find(std::string(40'000, 'a') + "c").matched);
  const absl::StatusOr<StepPattern> ambiguous = StepPattern::Compile("^(a|a)*$");
  ASSERT_TRUE(ambiguous.ok());
  EXPECT_FALSE(ambiguous->Find(std::string(30, 'a') + "b").matched);
  EXPECT_FALSE(ambiguous->Find(std::string(1'000'000, 'a') + "b").matched);
}

TEST(StepPatternTest, BadPatternsAreClearErrors) {
  const absl::StatusOr<StepPattern> unbalanced = StepPattern::Compile("([");
  ASSERT_FALSE(unbalanced.ok());
  EXPECT_EQ(unbalanced.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      unbalanced.status().message().find("step pattern \"([\" is not a valid regex (RE2 syntax)"),
      std::string::npos)
      << unbalanced.status();
  // Backreferences need backtracking: RE2 refuses them.
  EXPECT_FALSE(StepPattern::Compile(R"((a)\1)").ok());
  const absl::StatusOr<StepPattern> too_long = StepPattern::Compile(std::string(513, 'a'));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("513 bytes; at most 512"), std::string::npos)
      << too_long.status();
  EXPECT_TRUE(StepPattern::Compile(std::string(512, 'a')).ok());
  // Short to write, huge to compile: refused by the program-size bound.
  const absl::StatusOr<StepPattern> huge = StepPattern::Compile("((a{100}){100}){100}");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("not a valid regex"), std::string::npos) << huge.status();
}

}  // namespace
}  // namespace podscope::common
