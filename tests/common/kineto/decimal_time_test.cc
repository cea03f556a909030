#include "common/kineto/decimal_time.h"

#include <gtest/gtest.h>

namespace podscope::common {
namespace {

int64_t Parse(std::string_view s) {
  int64_t ns = -777;
  EXPECT_TRUE(ParseMicrosAsNanos(s, &ns)) << s;
  return ns;
}

TEST(DecimalTimeTest, IntegersAndFractionsAreExact) {
  EXPECT_EQ(Parse("1682725898236567"), 1'682'725'898'236'567'000);
  EXPECT_EQ(Parse("1682725898236567.123"), 1'682'725'898'236'567'123);
  EXPECT_EQ(Parse("68.0"), 68'000);
  EXPECT_EQ(Parse("0.5"), 500);
  EXPECT_EQ(Parse("0"), 0);
  EXPECT_EQ(Parse("-2.25"), -2'250);
  EXPECT_EQ(Parse("12 \n"), 12'000);  // raw tokens carry trailing whitespace
}

TEST(DecimalTimeTest, SubNanosecondDigitsRoundHalfAwayFromZero) {
  EXPECT_EQ(Parse("1.0004"), 1'000);
  EXPECT_EQ(Parse("1.0005"), 1'001);
  EXPECT_EQ(Parse("1682725898236567.1239"), 1'682'725'898'236'567'124);
  EXPECT_EQ(Parse("-0.0005"), -1);
  EXPECT_EQ(Parse("0.0001"), 0);
}

TEST(DecimalTimeTest, Exponents) {
  EXPECT_EQ(Parse("1e3"), 1'000'000);
  EXPECT_EQ(Parse("1.5E-3"), 2);  // 1.5 ns rounds to 2
  EXPECT_EQ(Parse("2.5e+2"), 250'000);
}

TEST(DecimalTimeTest, RejectsNonNumbersAndOverflow) {
  int64_t ns = 0;
  for (std::string_view bad : {"", "-", "1.", ".5", "1e", "abc", "1.2.3", "\"12\"", "1x",
                               "99999999999999999999", "1e30"}) {
    EXPECT_FALSE(ParseMicrosAsNanos(bad, &ns)) << bad;
  }
  // The largest time that fits: 9223372036854775807 ns.
  EXPECT_TRUE(ParseMicrosAsNanos("9223372036854775.807", &ns));
  EXPECT_EQ(ns, INT64_MAX);
  EXPECT_FALSE(ParseMicrosAsNanos("9223372036854775.808", &ns));
  // Sixteen integer digits with and without decimals: the edge of the common case.
  EXPECT_EQ(Parse("9223372036854775"), 9'223'372'036'854'775'000);
  EXPECT_EQ(Parse("1000000000000000.001"), 1'000'000'000'000'000'001);
  EXPECT_FALSE(ParseMicrosAsNanos("9223372036854776", &ns));
  EXPECT_FALSE(ParseMicrosAsNanos("9999999999999999.999", &ns));
}

}  // namespace
}  // namespace podscope::common
