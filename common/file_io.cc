#include "common/file_io.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::common {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

class PlainOutputFile : public OutputFile {
 public:
  PlainOutputFile(std::string path, FilePtr file)
      : path_(std::move(path)), file_(std::move(file)) {}
  absl::Status Write(std::string_view data) override {
    if (std::fwrite(data.data(), 1, data.size(), file_.get()) != data.size()) {
      return absl::InternalError(StrCat("writing ", path_, ": ", ErrnoText()));
    }
    bytes_ += data.size();
    return absl::OkStatus();
  }
  absl::Status Close() override {
    FILE* f = file_.release();
    if (f == nullptr) return absl::OkStatus();
    if (std::fclose(f) != 0) {
      return absl::InternalError(StrCat("closing ", path_, ": ", ErrnoText()));
    }
    return absl::OkStatus();
  }
  uint64_t bytes_written() const override { return bytes_; }

 private:
  std::string path_;
  FilePtr file_;
  uint64_t bytes_ = 0;
};

class GzipOutputFile : public OutputFile {
 public:
  GzipOutputFile(std::string path, FilePtr file) : path_(std::move(path)), file_(std::move(file)) {
    std::memset(&stream_, 0, sizeof(stream_));
    // 15 + 16: gzip wrapper; level 6 is zlib's default speed/size trade-off.
    initialized_ = deflateInit2(&stream_, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
    buffer_.resize(1 << 18);
  }
  ~GzipOutputFile() override {
    if (initialized_) deflateEnd(&stream_);
  }
  absl::Status Write(std::string_view data) override {
    bytes_ += data.size();
    return Deflate(data, Z_NO_FLUSH);
  }
  absl::Status Close() override {
    if (file_ == nullptr) return absl::OkStatus();
    absl::Status status = Deflate({}, Z_FINISH);
    FILE* f = file_.release();
    if (std::fclose(f) != 0 && status.ok()) {
      status = absl::InternalError(StrCat("closing ", path_, ": ", ErrnoText()));
    }
    return status;
  }
  uint64_t bytes_written() const override { return bytes_; }

 private:
  absl::Status Deflate(std::string_view data, int flush) {
    if (!initialized_) return absl::InternalError("zlib deflateInit2 failed");
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    stream_.avail_in = static_cast<uInt>(data.size());
    int rc;
    do {
      stream_.next_out = reinterpret_cast<Bytef*>(buffer_.data());
      stream_.avail_out = static_cast<uInt>(buffer_.size());
      rc = deflate(&stream_, flush);
      if (rc == Z_STREAM_ERROR) return absl::InternalError("zlib deflate failed");
      const size_t produced = buffer_.size() - stream_.avail_out;
      if (produced > 0 && std::fwrite(buffer_.data(), 1, produced, file_.get()) != produced) {
        return absl::InternalError(StrCat("writing ", path_, ": ", ErrnoText()));
      }
    } while (stream_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    return absl::OkStatus();
  }

  std::string path_;
  FilePtr file_;
  z_stream stream_;
  bool initialized_ = false;
  std::vector<char> buffer_;
  uint64_t bytes_ = 0;
};

}  // namespace

bool LooksGzipped(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

ByteBuffer::~ByteBuffer() { std::free(data_); }

ByteBuffer::ByteBuffer(ByteBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

ByteBuffer& ByteBuffer::operator=(ByteBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void ByteBuffer::Resize(size_t size) {
  if (size > capacity_ || data_ == nullptr) {
    const size_t capacity = std::max(size, capacity_ + capacity_ / 2);
    char* grown = static_cast<char*>(std::realloc(data_, capacity + kReadPadding));
    if (grown == nullptr) throw std::bad_alloc();
    data_ = grown;
    capacity_ = capacity;
  }
  size_ = size;
  std::memset(data_ + size_, 0, kReadPadding);
}

namespace {

// Compressed input, a piece at a time: an empty view at the end.
using InputPieces = std::function<absl::StatusOr<std::string_view>()>;

// Inflates gzip (several members allowed) a piece of output at a time, pulling compressed input
// as it needs it: memory holds one piece of input, whatever the stream's size.
class GzipInflater {
 public:
  explicit GzipInflater(InputPieces next_input) : next_input_(std::move(next_input)) {
    std::memset(&stream_, 0, sizeof(stream_));
    initialized_ = inflateInit2(&stream_, 15 + 32) == Z_OK;
  }
  ~GzipInflater() {
    if (initialized_) inflateEnd(&stream_);
  }
  GzipInflater(const GzipInflater&) = delete;
  GzipInflater& operator=(const GzipInflater&) = delete;

  // Fills up to `room` bytes at `out`; returns how many, 0 once the data has ended.
  absl::StatusOr<size_t> Read(char* out, size_t room) {
    if (!initialized_) return absl::InternalError("zlib inflateInit2 failed");
    size_t produced = 0;
    while (produced < room && !ended_) {
      if (stream_.avail_in == 0 && !input_done_) RETURN_IF_ERROR(Pull());
      stream_.next_out = reinterpret_cast<Bytef*>(out + produced);
      stream_.avail_out = static_cast<uInt>(std::min<size_t>(room - produced, 1u << 30));
      const uInt before = stream_.avail_out;
      const int rc = inflate(&stream_, Z_NO_FLUSH);
      produced += before - stream_.avail_out;
      if (rc == Z_STREAM_END) {
        // The member ended: see whether another follows (concatenated gzip files are gzip).
        if (stream_.avail_in == 0 && !input_done_) RETURN_IF_ERROR(Pull());
        if (stream_.avail_in == 0) {
          ended_ = true;
          break;
        }
        if (inflateReset(&stream_) != Z_OK) return absl::InternalError("zlib inflateReset failed");
        continue;
      }
      if (rc == Z_BUF_ERROR && stream_.avail_in == 0 && input_done_) {
        return absl::DataLossError(
            StrCat("gzip stream is truncated after ", stream_.total_in, " compressed bytes"));
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return absl::DataLossError(StrCat("not valid gzip data at compressed offset ",
                                          stream_.total_in, ": ",
                                          stream_.msg != nullptr ? stream_.msg : "inflate failed"));
      }
    }
    return produced;
  }

 private:
  absl::Status Pull() {
    ASSIGN_OR_RETURN(std::string_view piece, next_input_());
    input_done_ = piece.empty();
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(piece.data()));
    stream_.avail_in = static_cast<uInt>(piece.size());
    return absl::OkStatus();
  }

  InputPieces next_input_;
  z_stream stream_;
  bool initialized_ = false;
  bool input_done_ = false;
  bool ended_ = false;
};

// Inflates gzip into `out`, growing it as output arrives but never past max_output_bytes + 1:
// memory follows what the data really inflates to, up to the bound, whatever the input claims.
// `size_hint` is a first guess of the output size.
absl::Status Inflate(const InputPieces& next_input, uint64_t size_hint, uint64_t max_output_bytes,
                     ByteBuffer* out) {
  GzipInflater inflater(next_input);
  out->Resize(std::min<uint64_t>(std::max<uint64_t>(size_hint, 1 << 16), max_output_bytes + 1));
  size_t produced = 0;
  while (true) {
    if (produced == out->size()) {
      if (out->size() > max_output_bytes) {
        return absl::ResourceExhaustedError(
            StrCat("decompressed size exceeds the limit of ", max_output_bytes, " bytes"));
      }
      out->Resize(std::min<uint64_t>(out->size() * 2, max_output_bytes + 1));
    }
    ASSIGN_OR_RETURN(const size_t n, inflater.Read(out->data() + produced, out->size() - produced));
    if (n == 0) break;
    produced += n;
  }
  out->Resize(produced);
  return absl::OkStatus();
}

// The gzip trailer's ISIZE is the uncompressed size mod 2^32 (of the last member): a good first
// guess that usually makes inflating a single allocation. Only a guess: it is capped by the
// bound, and the data decides.
uint64_t TrailerSizeHint(std::string_view tail, uint64_t compressed_size) {
  if (tail.size() < 4 || compressed_size < 18) return compressed_size * 4;
  const auto* t = reinterpret_cast<const unsigned char*>(tail.data() + tail.size() - 4);
  const uint32_t isize = t[0] | (t[1] << 8) | (t[2] << 16) | (static_cast<uint32_t>(t[3]) << 24);
  return isize >= compressed_size / 2 ? uint64_t{isize} + 1 : compressed_size * 4;
}

}  // namespace

absl::Status Gunzip(std::string_view compressed, uint64_t max_output_bytes, ByteBuffer* out) {
  bool given = false;
  const InputPieces once = [&]() -> absl::StatusOr<std::string_view> {
    if (given) return std::string_view();
    given = true;
    return compressed;
  };
  return Inflate(once, TrailerSizeHint(compressed, compressed.size()), max_output_bytes, out);
}

absl::Status Gunzip(std::string_view compressed, uint64_t max_output_bytes, std::string* out) {
  ByteBuffer buffer;
  absl::Status status = Gunzip(compressed, max_output_bytes, &buffer);
  if (status.ok()) out->assign(buffer.data(), buffer.size());
  return status;
}

namespace {

uint64_t FileSize(std::FILE* file) {
  if (std::fseek(file, 0, SEEK_END) != 0) return 0;
  const long size = std::ftell(file);
  return size < 0 ? 0 : static_cast<uint64_t>(size);
}

// Reads the file from its start into `out`: all of it, or its first `max_bytes`.
absl::Status ReadRaw(const std::string& path, std::FILE* file, const ReadLimits& limits,
                     uint64_t max_bytes, ByteBuffer* out) {
  if (std::fseek(file, 0, SEEK_END) != 0) {
    return absl::InvalidArgumentError(StrCat(path, ": not a regular file"));
  }
  const long size = std::ftell(file);
  if (size < 0) return absl::InvalidArgumentError(StrCat(path, ": cannot size: ", ErrnoText()));
  if (static_cast<uint64_t>(size) > limits.max_file_bytes) {
    return absl::ResourceExhaustedError(
        StrCat(path, ": ", size, " bytes exceeds the limit of ", limits.max_file_bytes, " bytes"));
  }
  std::rewind(file);
  out->Resize(static_cast<size_t>(std::min<uint64_t>(static_cast<uint64_t>(size), max_bytes)));
  if (out->size() > 0 && std::fread(out->data(), 1, out->size(), file) != out->size()) {
    return absl::DataLossError(StrCat("reading ", path, ": ", ErrnoText()));
  }
  return absl::OkStatus();
}

bool HasGzName(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

}  // namespace

namespace {

// How far a gzip file may inflate: the absolute bound, or the ratio's when that is lower
// (`*by_ratio` says which).
uint64_t InflateBound(const ReadLimits& limits, uint64_t compressed_size, bool* by_ratio) {
  uint64_t bound = limits.max_decompressed_bytes;
  *by_ratio = false;
  if (limits.max_inflate_ratio > 0) {
    const uint64_t ratio_bound =
        std::max<uint64_t>(kInflateRatioFloorBytes, compressed_size * limits.max_inflate_ratio);
    if (ratio_bound < bound) {
      bound = ratio_bound;
      *by_ratio = true;
    }
  }
  return bound;
}

absl::Status InflateBoundError(const ReadLimits& limits, uint64_t compressed_size, uint64_t bound,
                               bool by_ratio) {
  if (by_ratio) {
    return absl::ResourceExhaustedError(StrCat("inflates to more than ", limits.max_inflate_ratio,
                                               " times its compressed size of ", compressed_size,
                                               " bytes (a decompression bomb?)"));
  }
  return absl::ResourceExhaustedError(
      StrCat("decompressed size exceeds the limit of ", bound, " bytes"));
}

// Opens `path` and tells whether it holds gzip (refusing a .gz name on other data).
absl::StatusOr<FilePtr> OpenTraceFile(const std::string& path, const ReadLimits& limits,
                                      bool* gzipped) {
  FilePtr file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) return absl::NotFoundError(StrCat("cannot open ", path, ": ", ErrnoText()));
  ByteBuffer magic;
  RETURN_IF_ERROR(ReadRaw(path, file.get(), limits, 2, &magic));
  *gzipped = LooksGzipped(magic.view());
  if (!*gzipped && HasGzName(path)) {
    return absl::InvalidArgumentError(
        StrCat(path, ": named .gz but is not gzip data (no gzip magic at offset 0)"));
  }
  return file;
}

}  // namespace

absl::Status ReadFileInto(const std::string& path, const ReadLimits& limits, ByteBuffer* out) {
  bool gzipped = false;
  ASSIGN_OR_RETURN(FilePtr file, OpenTraceFile(path, limits, &gzipped));
  if (!gzipped) return ReadRaw(path, file.get(), limits, UINT64_MAX, out);
  // Gzip: inflate straight from the file, a piece at a time, so memory holds only the output
  // (bounded) and one piece of input, never the whole compressed file besides.
  const uint64_t compressed_size = FileSize(file.get());
  bool by_ratio = false;
  const uint64_t bound = InflateBound(limits, compressed_size, &by_ratio);
  char tail[4] = {};
  if (compressed_size >= 18 && std::fseek(file.get(), -4, SEEK_END) == 0) {
    if (std::fread(tail, 1, 4, file.get()) != 4) std::memset(tail, 0, 4);
  }
  std::rewind(file.get());
  std::vector<char> piece(1 << 20);
  const InputPieces read_piece = [&]() -> absl::StatusOr<std::string_view> {
    const size_t n = std::fread(piece.data(), 1, piece.size(), file.get());
    if (n == 0 && std::ferror(file.get()))
      return absl::DataLossError(StrCat("reading: ", ErrnoText()));
    return std::string_view(piece.data(), n);
  };
  absl::Status status =
      Inflate(read_piece, TrailerSizeHint(std::string_view(tail, 4), compressed_size), bound, out);
  if (status.code() == absl::StatusCode::kResourceExhausted)
    status = InflateBoundError(limits, compressed_size, bound, by_ratio);
  if (!status.ok()) return absl::Status(status.code(), StrCat(path, ": ", status.message()));
  return absl::OkStatus();
}

struct FileBlockReader::State {
  std::string path;
  ReadLimits limits;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file{nullptr, &std::fclose};
  std::vector<char> block;
  std::vector<char> piece;  // compressed input, when gzipped
  // The gzip inflater behind a function, so this struct names no type of this file's own.
  std::function<absl::StatusOr<size_t>(char* out, size_t room)> inflate;
  uint64_t compressed_size = 0;
  uint64_t bound = 0;
  bool by_ratio = false;
  uint64_t bytes_read = 0;
};

FileBlockReader::FileBlockReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
FileBlockReader::~FileBlockReader() = default;
FileBlockReader::FileBlockReader(FileBlockReader&&) noexcept = default;
FileBlockReader& FileBlockReader::operator=(FileBlockReader&&) noexcept = default;

absl::StatusOr<FileBlockReader> FileBlockReader::Open(const std::string& path,
                                                      const ReadLimits& limits,
                                                      size_t block_bytes) {
  auto state = std::make_unique<State>();
  state->path = path;
  state->limits = limits;
  bool gzipped = false;
  ASSIGN_OR_RETURN(FilePtr file, OpenTraceFile(path, limits, &gzipped));
  state->file.reset(file.release());
  std::rewind(state->file.get());
  state->block.resize(std::max<size_t>(block_bytes, 1));
  if (gzipped) {
    state->compressed_size = FileSize(state->file.get());
    std::rewind(state->file.get());
    state->bound = InflateBound(limits, state->compressed_size, &state->by_ratio);
    state->piece.resize(1 << 20);
    State* s = state.get();
    auto inflater = std::make_shared<GzipInflater>([s]() -> absl::StatusOr<std::string_view> {
      const size_t n = std::fread(s->piece.data(), 1, s->piece.size(), s->file.get());
      if (n == 0 && std::ferror(s->file.get()))
        return absl::DataLossError(StrCat("reading: ", ErrnoText()));
      return std::string_view(s->piece.data(), n);
    });
    state->inflate = [inflater](char* out, size_t room) { return inflater->Read(out, room); };
  }
  return FileBlockReader(std::move(state));
}

absl::StatusOr<std::string_view> FileBlockReader::Next() {
  State& s = *state_;
  size_t n = 0;
  if (!s.inflate) {
    n = std::fread(s.block.data(), 1, s.block.size(), s.file.get());
    if (n == 0 && std::ferror(s.file.get()))
      return absl::DataLossError(StrCat("reading ", s.path, ": ", ErrnoText()));
  } else {
    absl::StatusOr<size_t> got = s.inflate(s.block.data(), s.block.size());
    if (!got.ok()) {
      return absl::Status(got.status().code(), StrCat(s.path, ": ", got.status().message()));
    }
    n = *got;
    if (s.bytes_read + n > s.bound) {
      const absl::Status too_big =
          InflateBoundError(s.limits, s.compressed_size, s.bound, s.by_ratio);
      return absl::Status(too_big.code(), StrCat(s.path, ": ", too_big.message()));
    }
  }
  s.bytes_read += n;
  return std::string_view(s.block.data(), n);
}

uint64_t FileBlockReader::bytes_read() const { return state_->bytes_read; }

absl::StatusOr<std::string> ReadFileMaybeGzip(const std::string& path, const ReadLimits& limits) {
  ByteBuffer buffer;
  RETURN_IF_ERROR(ReadFileInto(path, limits, &buffer));
  std::string out;
  out.reserve(buffer.size() + kReadPadding);
  out.assign(buffer.data(), buffer.size());
  return out;
}

absl::StatusOr<std::string> GzipCompress(std::string_view data, int level) {
  z_stream stream;
  std::memset(&stream, 0, sizeof(stream));
  if (deflateInit2(&stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError("zlib deflateInit2 failed");
  }
  std::string out(deflateBound(&stream, data.size()) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  if (rc != Z_STREAM_END) return absl::InternalError("zlib deflate did not finish");
  return out;
}

struct GzipStreamWriter::State {
  z_stream stream{};
  bool finished = false;
};

GzipStreamWriter::GzipStreamWriter(std::function<absl::Status(std::string_view)> sink, int level)
    : sink_(std::move(sink)), state_(std::make_unique<State>()) {
  // 15 + 16: a gzip wrapper. Failure here is an allocation failure, reported by Write.
  if (deflateInit2(&state_->stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    state_->finished = true;
}

GzipStreamWriter::~GzipStreamWriter() { deflateEnd(&state_->stream); }

absl::Status GzipStreamWriter::Write(std::string_view data) {
  if (state_->finished) return absl::FailedPreconditionError("gzip stream already finished");
  return Deflate(data, Z_NO_FLUSH);
}

absl::Status GzipStreamWriter::Finish() {
  if (state_->finished) return absl::FailedPreconditionError("gzip stream already finished");
  absl::Status status = Deflate({}, Z_FINISH);
  state_->finished = true;
  return status;
}

absl::Status GzipStreamWriter::Deflate(std::string_view data, int flush) {
  z_stream& z = state_->stream;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  char out[64 << 10];
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(out);
    z.avail_out = sizeof(out);
    const int rc = deflate(&z, flush);
    if (rc == Z_STREAM_ERROR) return absl::InternalError("zlib deflate failed");
    const size_t produced = sizeof(out) - z.avail_out;
    if (produced > 0) RETURN_IF_ERROR(sink_(std::string_view(out, produced)));
    if (flush == Z_FINISH ? rc == Z_STREAM_END : (z.avail_in == 0 && z.avail_out != 0))
      return absl::OkStatus();
  }
}

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::Open(const std::string& path, bool gzip) {
  FilePtr file(std::fopen(path.c_str(), "wb"));
  if (file == nullptr) {
    return absl::PermissionDeniedError(StrCat("cannot create ", path, ": ", ErrnoText()));
  }
  std::setvbuf(file.get(), nullptr, _IOFBF, 1 << 20);
  if (gzip) return std::make_unique<GzipOutputFile>(path, std::move(file));
  return std::make_unique<PlainOutputFile>(path, std::move(file));
}

}  // namespace podscope::common
