#include "common/kineto/trace_json_splitter.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>
#include <vector>

namespace podscope::common {
namespace {

struct Split {
  std::vector<std::pair<std::string, std::string>> members;
  std::vector<std::string> elements;  // every element's text, in order, across batches
  size_t batches = 0;
  int begins = 0, ends = 0;
  absl::Status status;
  uint64_t error_offset = 0;
};

// Splits `doc` fed `block` bytes at a time, checking on the way that every batch is the
// document's own bytes at the offset it claims.
Split SplitInBlocks(const std::string& doc, size_t block, size_t batch_bytes,
                    size_t max_piece_bytes = 1 << 20,
                    std::function<bool(std::string_view)> must_keep = {}) {
  Split out;
  TraceJsonSplitter::Sink sink;
  sink.must_keep = std::move(must_keep);
  sink.member = [&](std::string_view key, std::string_view value, uint64_t offset) {
    EXPECT_EQ(doc.substr(offset, value.size()), value);
    out.members.emplace_back(key, value);
    return absl::OkStatus();
  };
  sink.events_begin = [&](uint64_t offset) {
    EXPECT_EQ(doc[offset], '[');
    ++out.begins;
    return absl::OkStatus();
  };
  sink.events = [&](std::string_view batch, uint64_t offset) {
    ++out.batches;
    EXPECT_EQ(batch.front(), '[');
    EXPECT_EQ(batch.back(), ']');
    EXPECT_EQ(doc.substr(offset, batch.size() - 2), batch.substr(1, batch.size() - 2));
    simdjson::dom::parser parser;
    simdjson::dom::element parsed;
    EXPECT_EQ(parser.parse(batch.data(), batch.size()).get(parsed), simdjson::SUCCESS) << batch;
    simdjson::dom::array array;
    if (parsed.get_array().get(array) == simdjson::SUCCESS) {
      for (simdjson::dom::element e : array) out.elements.push_back(simdjson::minify(e));
    }
    return absl::OkStatus();
  };
  sink.events_end = [&] {
    ++out.ends;
    return absl::OkStatus();
  };
  TraceJsonSplitter splitter({.batch_bytes = batch_bytes, .max_piece_bytes = max_piece_bytes},
                             sink);
  for (size_t at = 0; at < doc.size() && out.status.ok(); at += block)
    out.status = splitter.Feed(std::string_view(doc).substr(at, block));
  if (out.status.ok()) out.status = splitter.Finish();
  out.error_offset = splitter.error_offset();
  return out;
}

// Strings that look like structure: brackets, braces, commas and quotes, escaped and not.
const std::string kDoc = R"( {"schemaVersion": 1, "distributedInfo": {"rank": 3, "note": "}],{"},)"
                         R"( "traceEvents": [ {"name": "a\"},{\"b", "ts": 1},)"
                         R"({"name": "c\\", "args": {"x": [1, [2, {"y": "]"}]]}},  3 ,)"
                         "\n"
                         R"( {"name": "d,e"}, "s[{" ], "tail": "x\\\"y", "n": -1.5e3 })"
                         "\n";

TEST(TraceJsonSplitterTest, ElementsAndMembersAreWholeWhateverTheBlocksAndBatches) {
  const std::vector<std::string> elements = {R"({"name":"a\"},{\"b","ts":1})",
                                             R"({"name":"c\\","args":{"x":[1,[2,{"y":"]"}]]}})",
                                             "3", R"({"name":"d,e"})", R"("s[{")"};
  const std::vector<std::pair<std::string, std::string>> members = {
      {"schemaVersion", "1"},
      {"distributedInfo", R"({"rank": 3, "note": "}],{"})"},
      {"tail", R"("x\\\"y")"},
      {"n", "-1.5e3"}};
  for (size_t block : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, kDoc.size()}) {
    for (size_t batch : {size_t{1}, size_t{30}, size_t{1} << 20}) {
      const Split s = SplitInBlocks(kDoc, block, batch);
      ASSERT_TRUE(s.status.ok()) << s.status << " block " << block << " batch " << batch;
      EXPECT_EQ(s.elements, elements) << "block " << block << " batch " << batch;
      EXPECT_EQ(s.members, members) << "block " << block << " batch " << batch;
      EXPECT_EQ(s.begins, 1);
      EXPECT_EQ(s.ends, 1);
    }
  }
  // A batch per element when batches are tiny; one when they are large.
  EXPECT_EQ(SplitInBlocks(kDoc, 5, 1).batches, elements.size());
  EXPECT_EQ(SplitInBlocks(kDoc, 5, 1 << 20).batches, 1u);
}

TEST(TraceJsonSplitterTest, AnEmptyArrayHandsOverNoBatch) {
  const Split s = SplitInBlocks(R"({"traceEvents": [ ]})", 3, 1);
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.batches, 0u);
  EXPECT_EQ(s.begins, 1);
  EXPECT_EQ(s.ends, 1);
}

TEST(TraceJsonSplitterTest, StructuralErrorsSayWhatAndWhere) {
  struct Case {
    std::string doc, what;
    uint64_t offset;
  };
  const std::vector<Case> cases = {
      {"", "the document is empty", 0},
      {"  [1]", "top level must be a JSON object", 2},
      {R"({"traceEvents": {}})", "traceEvents must be an array", 16},
      {R"({"traceEvents": []} x)", "unexpected content after the top-level object", 20},
      {R"({"traceEvents": [{"a": 1})", "ends before its top-level object closes", 25},
      {R"({"a" 1})", "expected ':' after a key", 5},
      {R"({"a": 1 "b": 2})", "expected ',' or '}'", 8},
      {R"({"a": , "traceEvents": []})", "a key without a value", 6},
      {R"({, "traceEvents": []})", "expected a key", 1},
      {R"({"traceEvents": [{}, ]})", "an element is missing", 21},
      {R"({"traceEvents": [{}}})", "'}' where the array should close", 19},
      {"{\"a\x01b\": 1, \"traceEvents\": []}", "a control character in a key", 3},
  };
  for (const Case& c : cases) {
    const Split s = SplitInBlocks(c.doc, 4, 1);
    EXPECT_EQ(s.status.code(), absl::StatusCode::kInvalidArgument) << c.doc;
    EXPECT_NE(s.status.message().find(c.what), std::string::npos) << c.doc << ": " << s.status;
    EXPECT_EQ(s.error_offset, c.offset) << c.doc;
  }
}

TEST(TraceJsonSplitterTest, AnElementOrMemberPastTheLimitIsRefusedNotHeld) {
  const std::string big(5000, 'x');
  const Split element =
      SplitInBlocks(R"({"traceEvents": [{"name": ")" + big + R"("}]})", 256, 64, 1024);
  EXPECT_EQ(element.status.code(), absl::StatusCode::kResourceExhausted) << element.status;
  EXPECT_NE(element.status.message().find("a traceEvents element is larger than the limit of 1024"),
            std::string::npos)
      << element.status;
  const Split member =
      SplitInBlocks(R"({"meta": ")" + big + R"(", "traceEvents": []})", 256, 64, 1024);
  EXPECT_EQ(member.status.code(), absl::StatusCode::kResourceExhausted) << member.status;
  EXPECT_NE(member.status.message().find("the value of \"meta\""), std::string::npos)
      << member.status;
  EXPECT_EQ(member.error_offset, 9u);    // where the value starts
  EXPECT_EQ(element.error_offset, 17u);  // where the batch that would hold it starts
  // A member nobody needs is scanned past, whatever its size, and never handed over.
  const auto only_info = [](std::string_view key) { return key == "distributedInfo"; };
  const Split skipped = SplitInBlocks(R"({"meta": ")" + big +
                                          R"(", "distributedInfo": {"rank": 2},)"
                                          R"( "traceEvents": [1]})",
                                      256, 64, 1024, only_info);
  ASSERT_TRUE(skipped.status.ok()) << skipped.status;
  EXPECT_EQ(
      skipped.members,
      (std::vector<std::pair<std::string, std::string>>{{"distributedInfo", R"({"rank": 2})"}}));
  EXPECT_EQ(skipped.elements, std::vector<std::string>{"1"});
  // One that is needed is still refused.
  EXPECT_EQ(SplitInBlocks(R"({"distributedInfo": ")" + big + R"("})", 256, 64, 1024, only_info)
                .status.code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(TraceJsonSplitterTest, TheSinksErrorStopsTheSplit) {
  TraceJsonSplitter::Sink sink;
  int batches = 0;
  sink.events = [&](std::string_view, uint64_t) {
    ++batches;
    return absl::InvalidArgumentError("no thanks");
  };
  TraceJsonSplitter splitter({.batch_bytes = 1}, sink);
  EXPECT_EQ(splitter.Feed(R"({"traceEvents": [1, 2, 3]})").message(), "no thanks");
  EXPECT_EQ(batches, 1);
  EXPECT_EQ(splitter.Feed("more").code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace podscope::common
