#include "common/mapped_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/file_io.h"
#include "common/kineto/kineto_importer.h"
#include "tests/test_paths.h"

namespace podscope::common {
namespace {

using podscope::testing::ScratchDir;

// Three pages and a bit, each page's bytes different from its neighbours'.
std::string PagesOf(char first) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::string text;
  for (int p = 0; p < 3; ++p) text += std::string(page, static_cast<char>(first + p));
  return text + "tail";
}

TEST(MappedFileTest, ViewsTheFileWithZeroPaddingAfterIt) {
  ScratchDir dir;
  const std::string text = PagesOf('a');
  absl::StatusOr<MappedFile> mapped = MappedFile::Map(dir.Write("f", text), 1 << 20);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_EQ(mapped->view(), text);
  for (size_t i = 0; i < kReadPadding; ++i) EXPECT_EQ(mapped->view().data()[text.size() + i], 0);
  EXPECT_FALSE(mapped->damaged());
  // A padding that runs onto a page the file has none of is readable too.
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  absl::StatusOr<MappedFile> whole_page =
      MappedFile::Map(dir.Write("g", std::string(page, 'x')), 1 << 20);
  ASSERT_TRUE(whole_page.ok()) << whole_page.status();
  for (size_t i = 0; i < kReadPadding; ++i) EXPECT_EQ(whole_page->view().data()[page + i], 0);
}

TEST(MappedFileTest, WhatCannotBeMappedSaysWhy) {
  ScratchDir dir;
  EXPECT_EQ(MappedFile::Map(dir.File("missing"), 1 << 20).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(MappedFile::Map(dir.path(), 1 << 20).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MappedFile::Map(dir.Write("empty", ""), 1 << 20).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const absl::Status big = MappedFile::Map(dir.Write("big", "0123456789"), 9).status();
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.message().find("10 bytes exceeds the limit of 9 bytes"), std::string::npos) << big;
}

// The file is cut short while mapped: what was read past its new end is zeros, the mapping says
// it is damaged, and the process lives.
TEST(MappedFileTest, AFileTruncatedWhileMappedReadsAsZerosAndIsMarkedDamaged) {
  ScratchDir dir;
  const std::string text = PagesOf('a');
  const std::string path = dir.Write("f", text);
  absl::StatusOr<MappedFile> mapped = MappedFile::Map(path, 1 << 20);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(page)), 0);
  const volatile char* bytes = mapped->view().data();
  EXPECT_EQ(bytes[0], 'a');  // still the file's
  EXPECT_EQ(bytes[page + 5], 0);
  EXPECT_EQ(bytes[2 * page + 7], 0);
  EXPECT_TRUE(mapped->damaged());
  // Another mapping, of an intact file, is not.
  absl::StatusOr<MappedFile> other = MappedFile::Map(dir.Write("g", text), 1 << 20);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->view()[page + 5], 'b');
  EXPECT_FALSE(other->damaged());
}

// A SIGBUS at an address no MappedFile owns ends the process as SIGBUS always does.
TEST(MappedFileDeathTest, ASigbusOutsideAnyMappingStillEndsTheProcess) {
  ScratchDir dir;
  const std::string path = dir.Write("f", PagesOf('a'));
  ASSERT_TRUE(MappedFile::Map(path, 1 << 20).ok());  // the handler is installed
  EXPECT_EXIT(
      {
        const int fd = open(path.c_str(), O_RDONLY);
        const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        auto* raw = static_cast<const volatile char*>(
            mmap(nullptr, 3 * page, PROT_READ, MAP_PRIVATE, fd, 0));
        if (truncate(path.c_str(), 0) != 0) _exit(3);
        const char c = raw[2 * page];
        _exit(c == 0 ? 4 : 5);  // not reached: the read raises SIGBUS
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

// Past kMaxOpen mappings at once, Map refuses, and the importer reads the file instead.
TEST(MappedFileTest, WithEverySlotTakenTheImporterReadsTheFile) {
  ScratchDir dir;
  const std::string path = dir.Write("rank-0.json",
                                     R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k",
      "pid": 0, "tid": 7, "ts": 10.0, "dur": 2.5, "args": {"stream": 7, "correlation": 1}}]})");
  std::vector<MappedFile> held;
  for (;;) {
    absl::StatusOr<MappedFile> m = MappedFile::Map(path, 1 << 20);
    if (!m.ok()) {
      EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition) << m.status();
      break;
    }
    held.push_back(*std::move(m));
    ASSERT_LE(held.size(), static_cast<size_t>(MappedFile::kMaxOpen));
  }
  EXPECT_EQ(held.size(), static_cast<size_t>(MappedFile::kMaxOpen));
  KinetoImporter importer;
  absl::StatusOr<ImportResult> read = importer.ImportFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  held.clear();
  absl::StatusOr<ImportResult> mapped = importer.ImportFile(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  ASSERT_EQ(read->workers.size(), 1u);
  ASSERT_EQ(mapped->workers.size(), 1u);
  EXPECT_EQ(read->workers[0].kernels.size(), 1u);
  EXPECT_EQ(mapped->workers[0].kernels.size(), read->workers[0].kernels.size());
  EXPECT_EQ(mapped->workers[0].kernels.start, read->workers[0].kernels.start);
}

}  // namespace
}  // namespace podscope::common
