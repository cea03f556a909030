// Bounded file reading (with transparent gzip) and buffered, optionally gzip-compressed
// writing. Trace inputs come from users and peers, so every read has a size bound.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace podscope::common {

// Extra zeroed bytes kept after file contents so SIMD parsers may read past the end.
inline constexpr size_t kReadPadding = 64;

// Below this output size the inflate ratio is not checked: tiny, very regular files legitimately
// inflate far more than real traces do.
inline constexpr uint64_t kInflateRatioFloorBytes = 1 << 20;

struct ReadLimits {
  uint64_t max_file_bytes = 4ull << 30;           // compressed or plain size on disk
  uint64_t max_decompressed_bytes = 16ull << 30;  // after gunzip
  // Gzip output may be at most this many times the compressed size (0: no ratio bound). Real
  // Kineto traces inflate 10-30x; a decompression bomb inflates ~1000x.
  uint64_t max_inflate_ratio = 0;
};

bool LooksGzipped(std::string_view bytes);

// A growable byte buffer for large inputs: growth does not zero-fill (realloc, which moves
// big blocks by remapping rather than copying), and kReadPadding zeroed bytes always follow
// the contents. Reused across files, it also avoids faulting fresh pages in for every file.
// Move-only; not thread-safe.
class ByteBuffer {
 public:
  ByteBuffer() = default;
  ~ByteBuffer();
  ByteBuffer(ByteBuffer&& other) noexcept;
  ByteBuffer& operator=(ByteBuffer&& other) noexcept;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }  // usable bytes, padding excluded
  std::string_view view() const { return {data_, size_}; }
  // Sets the size; new bytes are uninitialised. Grows geometrically.
  void Resize(size_t size);
  void Clear() { Resize(0); }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Reads `path` whole into `out` (reusing its memory); gunzips when it starts with the gzip
// magic, streaming from the file so that memory holds the output, never the compressed file
// besides. Output past a bound stops the inflate at once (ResourceExhausted). Errors name the
// file and the reason.
absl::Status ReadFileInto(const std::string& path, const ReadLimits& limits, ByteBuffer* out);
absl::Status Gunzip(std::string_view compressed, uint64_t max_output_bytes, ByteBuffer* out);

// Reads a file a block at a time, gunzipping it when it starts with the gzip magic: memory holds
// one block and one piece of compressed input, whatever the file inflates to. The limits bound
// the file and its inflated size as ReadFileInto's do. Errors name the file and the reason.
class FileBlockReader {
 public:
  static absl::StatusOr<FileBlockReader> Open(const std::string& path, const ReadLimits& limits,
                                              size_t block_bytes = 4 << 20);
  ~FileBlockReader();
  FileBlockReader(FileBlockReader&&) noexcept;
  FileBlockReader& operator=(FileBlockReader&&) noexcept;

  // The next block of (inflated) bytes, valid until the next call: empty at the end.
  absl::StatusOr<std::string_view> Next();
  uint64_t bytes_read() const;  // handed out so far

 private:
  struct State;
  explicit FileBlockReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Reads `path` whole; gunzips it when it starts with the gzip magic. The result has at least
// kReadPadding bytes of spare capacity after size(). Errors name the file and the reason.
absl::StatusOr<std::string> ReadFileMaybeGzip(const std::string& path,
                                              const ReadLimits& limits = {});

// Gunzips `compressed` (which may hold several gzip members) into `out`.
absl::Status Gunzip(std::string_view compressed, uint64_t max_output_bytes, std::string* out);

// Gzip-compresses `data` in memory (one gzip member).
absl::StatusOr<std::string> GzipCompress(std::string_view data, int level = 6);

// Gzip-compresses a stream of pieces in memory (one gzip member), handing compressed bytes to
// `sink` as they come, so a large body is never whole in memory. Not thread-safe.
class GzipStreamWriter {
 public:
  explicit GzipStreamWriter(std::function<absl::Status(std::string_view)> sink, int level = 6);
  ~GzipStreamWriter();
  GzipStreamWriter(const GzipStreamWriter&) = delete;
  GzipStreamWriter& operator=(const GzipStreamWriter&) = delete;
  absl::Status Write(std::string_view data);
  // Flushes the rest and the gzip trailer; nothing may be written after.
  absl::Status Finish();

 private:
  absl::Status Deflate(std::string_view data, int flush);
  std::function<absl::Status(std::string_view)> sink_;
  struct State;
  std::unique_ptr<State> state_;
};

// A buffered output file; gzip-compressed when asked. Not thread-safe.
class OutputFile {
 public:
  static absl::StatusOr<std::unique_ptr<OutputFile>> Open(const std::string& path, bool gzip);
  virtual ~OutputFile() = default;
  virtual absl::Status Write(std::string_view data) = 0;
  // Flushes and closes; the file is complete only when this returns OK.
  virtual absl::Status Close() = 0;
  virtual uint64_t bytes_written() const = 0;  // uncompressed bytes handed to Write
};

}  // namespace podscope::common
