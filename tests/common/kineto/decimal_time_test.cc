#include "common/kineto/decimal_time.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>

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

// Plain digits (no sign, no exponent) the long way, as a check on the eight-digits-at-once path.
std::optional<int64_t> Reference(std::string_view s) {
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);  // as raw tokens carry it
  const size_t dot = s.find('.');
  const std::string_view integer = s.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? "" : s.substr(dot + 1);
  if (integer.empty() || (integer.size() > 1 && integer[0] == '0')) return std::nullopt;
  if (dot != std::string_view::npos && fraction.empty()) return std::nullopt;
  for (std::string_view part : {integer, fraction}) {
    for (char c : part) {
      if (c < '0' || c > '9') return std::nullopt;
    }
  }
  unsigned __int128 ns = 0;
  for (char c : integer) ns = ns * 10 + static_cast<unsigned>(c - '0');
  for (size_t i = 0; i < 3; ++i) {
    ns = ns * 10 + (i < fraction.size() ? static_cast<unsigned>(fraction[i] - '0') : 0);
  }
  if (fraction.size() > 3 && fraction[3] >= '5') ++ns;  // half away from zero
  if (ns > static_cast<unsigned __int128>(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(ns);
}

TEST(DecimalTimeTest, AgreesWithTheLongWayOnEveryLengthAndEveryBadByte) {
  std::mt19937_64 random(11);
  for (int integer_digits = 1; integer_digits <= 20; ++integer_digits) {
    for (int fraction_digits = 0; fraction_digits <= 5; ++fraction_digits) {
      for (int trial = 0; trial < 40; ++trial) {
        std::string token;
        for (int i = 0; i < integer_digits; ++i) {
          token += static_cast<char>(
              '0' + (i == 0 && integer_digits > 1 ? 1 + random() % 9 : random() % 10));
        }
        if (fraction_digits > 0) token += '.';
        for (int i = 0; i < fraction_digits; ++i) token += static_cast<char>('0' + random() % 10);
        // Then one byte replaced by a neighbour of the digits' range, or a leading zero.
        std::string bad = token;
        const size_t at = random() % bad.size();
        if (bad[at] != '.') bad[at] = "/:0 "[random() % 4];
        for (const std::string& t : {token, bad}) {
          int64_t ns = -777;
          const std::optional<int64_t> expected = Reference(t);
          ASSERT_EQ(ParseMicrosAsNanos(t, &ns), expected.has_value()) << t;
          if (expected) {
            ASSERT_EQ(ns, *expected) << t;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace podscope::common
