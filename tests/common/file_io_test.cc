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

std::string WriteWith(const ScratchDir& dir, const std::string& name, const std::string& text,
                      bool gzip) {
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
  auto too_big =
      ReadFileMaybeGzip(plain, {.max_file_bytes = 1000, .max_decompressed_bytes = 1 << 30});
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

// Files are inflated a piece (1 MiB) at a time: members and pieces may end anywhere.
TEST(FileIoTest, StreamedInflateAcrossPiecesAndMembers) {
  ScratchDir dir;
  std::string noise(3 << 20, '\0');  // incompressible, so each member is ~3 MiB compressed
  uint64_t x = 88172645463325252ull;
  for (char& c : noise) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  const std::string a = Slurp(WriteWith(dir, "a.gz", noise, true));
  const std::string b = Slurp(WriteWith(dir, "b.gz", "tail", true));
  const std::string both = dir.Write("both.json.gz", a + b + a);
  absl::StatusOr<std::string> read = ReadFileMaybeGzip(both);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, noise + "tail" + noise);
  const std::string cut = dir.Write("cut.json.gz", (a + b).substr(0, a.size() + 5));
  EXPECT_EQ(ReadFileMaybeGzip(cut).status().code(), absl::StatusCode::kDataLoss);
}

// A decompression bomb: 1 MiB of gzip that inflates to 1 GiB. It is refused by the ratio bound
// after inflating at most its bound, whatever the gzip trailer claims.
TEST(FileIoTest, ADecompressionBombStopsAtItsBound) {
  ScratchDir dir;
  const std::string zeros = Slurp(WriteWith(dir, "z.gz", std::string(16 << 20, '\0'), true));
  std::string bomb;
  for (int i = 0; i < 64; ++i) bomb += zeros;
  const std::string path = dir.Write("bomb.json.gz", bomb);
  ByteBuffer out;
  absl::Status ratio =
      ReadFileInto(path, {.max_decompressed_bytes = 512 << 20, .max_inflate_ratio = 100}, &out);
  EXPECT_EQ(ratio.code(), absl::StatusCode::kResourceExhausted) << ratio;
  EXPECT_NE(ratio.message().find("inflates to more than 100 times its compressed size of " +
                                 std::to_string(bomb.size()) + " bytes (a decompression bomb?)"),
            std::string::npos)
      << ratio;
  // Memory follows the bound (the buffer grows by at most half again past a request).
  EXPECT_LE(out.capacity(), 150 * bomb.size()) << "memory stays within the bound";
  absl::Status absolute = ReadFileInto(path, {.max_decompressed_bytes = 8 << 20}, &out);
  EXPECT_EQ(absolute.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(absolute.message().find("decompressed size exceeds the limit of 8388608 bytes"),
            std::string::npos)
      << absolute;
  // Small files are not held to the ratio (below 1 MiB of output).
  const std::string small = WriteWith(dir, "small.json.gz", std::string(1 << 19, ' '), true);
  EXPECT_TRUE(ReadFileInto(small, {.max_inflate_ratio = 2}, &out).ok());
}

// Reads every block of `path` into one string.
absl::StatusOr<std::string> ReadInBlocks(const std::string& path, const ReadLimits& limits,
                                         size_t block) {
  absl::StatusOr<FileBlockReader> reader = FileBlockReader::Open(path, limits, block);
  if (!reader.ok()) return reader.status();
  std::string all;
  while (true) {
    absl::StatusOr<std::string_view> next = reader->Next();
    if (!next.ok()) return next.status();
    if (next->empty()) break;
    EXPECT_LE(next->size(), block);
    all.append(*next);
  }
  EXPECT_EQ(reader->bytes_read(), all.size());
  return all;
}

TEST(FileIoTest, ABlockReaderGivesTheFileAsWrittenPlainOrGzipped) {
  ScratchDir dir;
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "{\"ts\": " + std::to_string(i) + "},\n";
  const std::string plain = WriteWith(dir, "t.json", text, false);
  // Two gzip members back to back are one stream.
  const std::string one = Slurp(WriteWith(dir, "a.gz", text.substr(0, 1000), true));
  const std::string two = Slurp(WriteWith(dir, "b.gz", text.substr(1000), true));
  const std::string members = dir.Write("m.json.gz", one + two);
  for (size_t block : {size_t{7}, size_t{4096}, size_t{1} << 20}) {
    EXPECT_EQ(ReadInBlocks(plain, {}, block).value_or("failed"), text) << block;
    EXPECT_EQ(ReadInBlocks(members, {}, block).value_or("failed"), text) << block;
  }
  absl::StatusOr<std::string> truncated =
      ReadInBlocks(dir.Write("cut.json.gz", two.substr(0, two.size() / 2)), {}, 4096);
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss) << truncated.status();
  EXPECT_NE(truncated.status().message().find("cut.json.gz: gzip stream is truncated"),
            std::string::npos)
      << truncated.status();
  EXPECT_EQ(FileBlockReader::Open(dir.Write("fake.json.gz", "plain"), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FileBlockReader::Open(dir.File("absent.json"), {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(FileIoTest, ABlockReaderStopsABombAtItsBound) {
  ScratchDir dir;
  const std::string zeros = Slurp(WriteWith(dir, "z.gz", std::string(16 << 20, '\0'), true));
  const std::string path = dir.Write("bomb.json.gz", zeros + zeros + zeros + zeros);
  absl::StatusOr<std::string> ratio = ReadInBlocks(path, {.max_inflate_ratio = 100}, 1 << 20);
  EXPECT_EQ(ratio.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(ratio.status().message().find("bomb.json.gz: inflates to more than 100 times"),
            std::string::npos)
      << ratio.status();
  absl::StatusOr<std::string> absolute =
      ReadInBlocks(path, {.max_decompressed_bytes = 8 << 20}, 1 << 20);
  EXPECT_NE(absolute.status().message().find("decompressed size exceeds the limit of 8388608"),
            std::string::npos)
      << absolute.status();
}

TEST(FileIoTest, MissingFileNamesThePath) {
  auto read = ReadFileMaybeGzip("/nonexistent/podscope/trace.json");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find("/nonexistent/podscope/trace.json"), std::string::npos);
}

}  // namespace
}  // namespace podscope::common
