#include "common/file_io.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "tests/test_paths.h"

namespace podscope::common {
namespace {

using podscope::testing::ScratchDir;

// The file's bytes as they are on disk.
std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string WriteWith(const ScratchDir& dir, const std::string& name, const std::string& text, bool gzip) {
  auto file = OutputFile::Open(dir.File(name), gzip);
  EXPECT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->Write(text).ok());
  EXPECT_TRUE((*file)->Close().ok());
  return dir.File(name);
}

TEST(FileIoTest, GzipRoundTripAndPadding) {
  ScratchDir dir;
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "{\"ph\":\"X\",\"ts\":" + std::to_string(i) + "},";
  const std::string path = WriteWith(dir, "t.json.gz", text, /*gzip=*/true);
  absl::StatusOr<std::string> read = ReadFileMaybeGzip(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, text);
  EXPECT_GE(read->capacity(), read->size() + kReadPadding);
}

TEST(FileIoTest, PlainFileIsReadAsIs) {
  ScratchDir dir;
  const std::string path = WriteWith(dir, "t.json", "{\"traceEvents\":[]}", /*gzip=*/false);
  absl::StatusOr<std::string> read = ReadFileMaybeGzip(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "{\"traceEvents\":[]}");
}

TEST(FileIoTest, GzNameWithoutGzipDataIsAClearError) {
  ScratchDir dir;
  const std::string path = dir.Write("rank-0.json.gz", "{\"traceEvents\":[]}");
  absl::StatusOr<std::string> read = ReadFileMaybeGzip(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(read.status().message().find("rank-0.json.gz: named .gz but is not gzip data"),
            std::string::npos)
      << read.status();
}

TEST(FileIoTest, CorruptAndTruncatedGzipAreErrors) {
  ScratchDir dir;
  std::string text(200000, 'x');
  const std::string path = WriteWith(dir, "t.json.gz", text, true);
  const std::string raw = Slurp(path);  // the compressed bytes
  std::string out;
  absl::Status truncated = Gunzip(std::string_view(raw).substr(0, raw.size() / 2), 1 << 30, &out);
  EXPECT_EQ(truncated.code(), absl::StatusCode::kDataLoss) << truncated;
  std::string corrupt = raw;
  for (size_t i = 20; i < 40 && i < corrupt.size(); ++i) corrupt[i] = static_cast<char>(0xAA);
  absl::Status bad = Gunzip(corrupt, 1 << 30, &out);
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss) << bad;
  EXPECT_NE(bad.message().find("not valid gzip data"), std::string::npos) << bad;
}

TEST(FileIoTest, SizeLimitsAreEnforced) {
  ScratchDir dir;
  const std::string big(100000, 'a');
  const std::string plain = WriteWith(dir, "big.json", big, false);
  const std::string gz = WriteWith(dir, "big.json.gz", big, true);
  auto too_big = ReadFileMaybeGzip(plain, {.max_file_bytes = 1000, .max_decompressed_bytes = 1 << 30});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  auto bomb = ReadFileMaybeGzip(gz, {.max_file_bytes = 1 << 30, .max_decompressed_bytes = 5000});
  EXPECT_EQ(bomb.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(bomb.status().message().find("exceeds the limit of 5000 bytes"), std::string::npos);
}

TEST(FileIoTest, ConcatenatedGzipMembersAreOneStream) {
  ScratchDir dir;
  const std::string a = WriteWith(dir, "a.gz", "hello ", true);
  const std::string b = WriteWith(dir, "b.gz", "world", true);
  std::string out;
  ASSERT_TRUE(Gunzip(Slurp(a) + Slurp(b), 1000, &out).ok());
  EXPECT_EQ(out, "hello world");
}

TEST(FileIoTest, MissingFileNamesThePath) {
  auto read = ReadFileMaybeGzip("/nonexistent/podscope/trace.json");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find("/nonexistent/podscope/trace.json"), std::string::npos);
}

}  // namespace
}  // namespace podscope::common
