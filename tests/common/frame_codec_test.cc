#include "common/frame_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace podscope::common {
namespace {

TEST(FrameCodecTest, FramesSurviveAnySplitOfTheStream) {
  std::string stream;
  const std::vector<std::string> payloads = {"hello", "", std::string(5000, 'x'), "last"};
  for (const std::string& p : payloads) ASSERT_TRUE(AppendFrame(p, 1 << 20, &stream).ok());
  EXPECT_EQ(stream.size(), 4 * kFrameHeaderBytes + 5 + 5000 + 4);
  // The 5-byte frame's header, exactly: little-endian length.
  EXPECT_EQ(stream.substr(0, 4), std::string("\x05\x00\x00\x00", 4));
  for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, size_t{4096}, stream.size()}) {
    FrameReader reader(1 << 20);
    std::vector<std::string> got;
    for (size_t at = 0; at < stream.size(); at += piece) {
      reader.Append(std::string_view(stream).substr(at, piece));
      while (true) {
        auto next = reader.Next();
        ASSERT_TRUE(next.ok());
        if (!next->has_value()) break;
        got.push_back(**next);
      }
    }
    EXPECT_EQ(got, payloads) << "pieces of " << piece;
    EXPECT_EQ(reader.buffered(), 0u);
  }
}

TEST(FrameCodecTest, OversizedFramesAreRefusedOnBothSides) {
  std::string stream;
  EXPECT_EQ(AppendFrame(std::string(11, 'a'), 10, &stream).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(stream.empty());
  // A header announcing 4 GB: refused at once, without waiting for (or allocating) the bytes,
  // and the reader stays broken.
  FrameReader reader(1 << 20);
  reader.Append(std::string("\xff\xff\xff\xff", 4));
  EXPECT_EQ(reader.Next().status().code(), absl::StatusCode::kDataLoss);
  reader.Append(std::string("\x01\x00\x00\x00z", 5));
  EXPECT_EQ(reader.Next().status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace podscope::common
