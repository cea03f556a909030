// A plain file mapped read-only for parsing in place, guarded against the file shrinking
// meanwhile.
//
// Reading a large trace file copies every byte from the page cache into the process (a tenth of
// `podscope analyze`'s time on a 926 MB job); mapping it does not. A mapping has one hazard a
// read does not: should the file be truncated while mapped, touching a page past its new end
// raises SIGBUS, which kills the process. So every mapping is registered with a SIGBUS handler
// (installed once per process) that, for a fault inside a registered mapping, puts a page of
// zeros over the faulting page and marks the mapping damaged; the reader goes on over zeros and
// must ask damaged() before trusting what it read. A fault anywhere else goes to the handler
// that was there before, or kills the process as SIGBUS always did.
//
// kReadPadding zero bytes follow the contents, readable, as after a ByteBuffer. Move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace podscope::common {

class MappedFile {
 public:
  // At most this many mappings are open at once in a process; Map fails past it (the caller
  // reads the file instead).
  static constexpr int kMaxOpen = 64;

  // Maps `path`, a regular file of at most `max_bytes`. Fails (FailedPrecondition when reading
  // would do instead: not a regular file, empty, no mapping slot or address space free; else
  // with the reason) without side effects.
  static absl::StatusOr<MappedFile> Map(const std::string& path, uint64_t max_bytes);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // The file's bytes as they were when mapped, kReadPadding readable zero bytes after them.
  std::string_view view() const { return {data_, size_}; }
  // Whether a page of the file was gone when read (it was truncated while mapped): the bytes
  // read from that page were zeros, not the file's.
  bool damaged() const;

 private:
  MappedFile() = default;
  void Release();

  const char* data_ = nullptr;
  size_t size_ = 0;
  size_t reserved_ = 0;  // bytes mapped, padding and rounding included
  int slot_ = -1;
};

}  // namespace podscope::common
