#include "common/json_writer.h"

#include <gtest/gtest.h>

namespace podscope::common {
namespace {

TEST(JsonWriterTest, EscapesControlCharactersQuotesAndBackslashes) {
  JsonWriter w;
  w.String(std::string("a\"b\\c\nd\te\x01", 10));
  EXPECT_EQ(w.buffer(), R"("a\"b\\c\nd\te\u0001")");
}

TEST(JsonWriterTest, KeepsValidUtf8AndReplacesInvalidBytes) {
  JsonWriter w;
  w.String("µs \xe2\x86\x92 ok \xff end");
  EXPECT_EQ(w.buffer(), "\"µs \xe2\x86\x92 ok \\ufffd end\"");
}

TEST(JsonWriterTest, NanosecondsBecomeExactMicroseconds) {
  JsonWriter w;
  w.MicrosFromNanos(1'682'725'898'236'567'123).Char(' ').MicrosFromNanos(68'000).Char(' ');
  w.MicrosFromNanos(5).Char(' ').MicrosFromNanos(-1'500).Char(' ').MicrosFromNanos(0);
  EXPECT_EQ(w.buffer(), "1682725898236567.123 68 0.005 -1.500 0");
}

TEST(JsonWriterTest, NumbersAndFixedPoint) {
  JsonWriter w;
  w.Int(-42).Char(',').Uint(18446744073709551615ull).Char(',').Fixed(11.8149, 2).Char(',');
  w.Double(0.5).Char(',').Double(1.0 / 0.0);
  EXPECT_EQ(w.buffer(), "-42,18446744073709551615,11.81,0.5,null");
}

}  // namespace
}  // namespace podscope::common
