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
  w.String(std::string_view("µs \xe2\x86\x92 ok \xff end"));
  EXPECT_EQ(w.buffer(), "\"µs \xe2\x86\x92 ok \\ufffd end\"");
}

TEST(JsonWriterTest, NanosecondsBecomeExactMicroseconds) {
  JsonWriter w;
  w.BeginArray().MicrosFromNanos(1'682'725'898'236'567'123).MicrosFromNanos(68'000);
  w.MicrosFromNanos(5).MicrosFromNanos(-1'500).MicrosFromNanos(0).EndArray();
  EXPECT_EQ(w.buffer(), "[1682725898236567.123,68,0.005,-1.500,0]");
}

TEST(JsonWriterTest, NumbersAndFixedPoint) {
  JsonWriter w;
  w.BeginArray().Int(-42).Uint(18446744073709551615ull).Fixed(11.8149, 2);
  w.Double(0.5).Double(1.0 / 0.0).Fixed(-1.0 / 0.0, 2).Bool(true).Bool(false).Null().EndArray();
  EXPECT_EQ(w.buffer(), "[-42,18446744073709551615,11.81,0.5,null,null,true,false,null]");
}

TEST(JsonWriterTest, PlacesCommasBetweenMembersAndElementsOnly) {
  JsonWriter w;
  w.BeginObject().Key("a").Int(1).Key("b").BeginArray().Int(2).String("x").EndArray();
  w.Key("c").BeginObject().Key("d").Null().Key("e").BeginObject().EndObject().EndObject();
  w.Key("f").BeginArray().BeginArray().Int(3).EndArray().BeginObject().Key("g").Bool(true);
  w.EndObject().BeginArray().EndArray().EndArray().EndObject();
  EXPECT_EQ(w.buffer(), R"({"a":1,"b":[2,"x"],"c":{"d":null,"e":{}},"f":[[3],{"g":true},[]]})");
}

TEST(JsonWriterTest, EmptyContainers) {
  JsonWriter w;
  w.BeginObject().Key("o").BeginObject().EndObject().Key("a").BeginArray().EndArray();
  w.Key("lines").BeginArray(JsonWriter::kOneElementPerLine).EndArray().EndObject();
  EXPECT_EQ(w.buffer(), "{\"o\":{},\"a\":[],\"lines\":[\n\n]}");
}

TEST(JsonWriterTest, OneElementPerLineArrayPutsEachElementOnItsOwnLine) {
  JsonWriter w;
  w.BeginObject().Key("traceEvents").BeginArray(JsonWriter::kOneElementPerLine);
  w.BeginObject().Key("ph").String("X").Key("args").BeginArray().Int(1).Int(2).EndArray();
  w.EndObject().BeginObject().Key("ph").String("M").EndObject().Int(3);
  w.EndArray().EndObject().EndLine();
  EXPECT_EQ(w.buffer(),
            "{\"traceEvents\":[\n{\"ph\":\"X\",\"args\":[1,2]},\n{\"ph\":\"M\"},\n3\n]}\n");
}

// Streaming callers drain the text between values; the writer still knows where it is.
TEST(JsonWriterTest, DrainingMidDocumentKeepsTheNesting) {
  JsonWriter w;
  std::string out;
  auto drain = [&] {
    out += w.buffer();
    w.ClearBuffer();
  };
  w.BeginObject().Key("events").BeginArray(JsonWriter::kOneElementPerLine);
  drain();
  w.BeginObject().Key("a").Int(1);
  drain();
  w.Key("b").BeginArray().Int(2);
  drain();
  EXPECT_EQ(w.size(), 0u);
  w.Int(3).EndArray().EndObject();
  drain();
  w.BeginObject().EndObject();
  drain();
  w.EndArray().Key("n").Int(2).EndObject();
  drain();
  EXPECT_EQ(out, "{\"events\":[\n{\"a\":1,\"b\":[2,3]},\n{}\n],\"n\":2}");
}

// A key from the data is escaped as a string is; a string literal with a character to escape does
// not build as a key or a value, so these pass through std::string_view.
TEST(JsonWriterTest, KeysFromTheDataAreEscapedAsStringsAre) {
  using namespace std::string_view_literals;
  JsonWriter w;
  const std::string rank = "rank 7";
  w.BeginObject().Key("a \"quoted\" key"sv).Int(1).Key("back\\slash\n"sv).Int(2);
  w.Key("\xff"sv).Int(3).Key(""sv).Int(4).Key(rank).Int(5).Key("literal key").Int(6).EndObject();
  EXPECT_EQ(
      w.buffer(),
      R"({"a \"quoted\" key":1,"back\\slash\n":2,"\ufffd":3,"":4,"rank 7":5,"literal key":6})");
}

TEST(JsonWriterTest, KeyWithSpaceKeepsTheSpaceAfterTheColon) {
  JsonWriter w;
  w.BeginObject().Key("backend").String("nccl").KeyWithSpace("rank").Int(3);
  w.KeyWithSpace("world_size").Int(8).EndObject();
  EXPECT_EQ(w.buffer(), R"({"backend":"nccl","rank": 3,"world_size": 8})");
}

TEST(JsonWriterTest, RawValueIsOneWholeValue) {
  JsonWriter w;
  w.BeginObject().Key("a").RawValue(R"({"x":[1,2]})").Key("b").BeginArray();
  w.RawValue("[]").RawValue("{}").Int(1).EndArray().EndObject();
  EXPECT_EQ(w.buffer(), R"({"a":{"x":[1,2]},"b":[[],{},1]})");
}

// EndLine ends a top-level value: the next one starts afresh (JSON Lines).
TEST(JsonWriterTest, EndLineSeparatesTopLevelValues) {
  JsonWriter w;
  w.BeginObject().Key("a").Int(1).EndObject().EndLine();
  w.BeginArray().Int(2).EndArray().EndLine();
  w.String("three").EndLine();
  EXPECT_EQ(w.buffer(), "{\"a\":1}\n[2]\n\"three\"\n");
}

#ifndef NDEBUG
TEST(JsonWriterDeathTest, MisuseIsCaughtInDebugBuilds) {
  EXPECT_DEATH(JsonWriter().BeginObject().EndArray(), "EndArray without BeginArray");
  EXPECT_DEATH(JsonWriter().BeginArray().EndObject(), "EndObject without BeginObject");
  EXPECT_DEATH(JsonWriter().EndObject(), "EndObject without BeginObject");
  EXPECT_DEATH(JsonWriter().BeginObject().Key("a").EndObject(), "a Key without a value");
  EXPECT_DEATH(JsonWriter().BeginObject().Key("a").Key("b"), "a Key without a value");
  EXPECT_DEATH(JsonWriter().BeginObject().Int(1), "a value in an object without a Key");
  EXPECT_DEATH(JsonWriter().BeginArray().Key("a"), "a Key outside an object");
  EXPECT_DEATH(JsonWriter().Int(1).Int(2), "two top-level values without EndLine");
  EXPECT_DEATH(JsonWriter().BeginArray().EndLine(), "EndLine inside an object or array");
}
#endif

}  // namespace
}  // namespace podscope::common
