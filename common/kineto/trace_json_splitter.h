// Splits a Chrome-trace JSON document, fed a block at a time, into the pieces an importer parses
// one by one, so that no reader holds the whole text: a trace of one real rank's 5 s is half a
// gigabyte of JSON, while its events, once imported, take a tenth of that.
//
// The document is one object. Its members other than traceEvents (metadata: distributedInfo,
// deviceProperties, ...) are handed over whole, each with its key. traceEvents' elements are
// handed over in batches of about `batch_bytes`, each batch the JSON array of whole elements
// "[e, e, ...]" exactly as they were written, so an offset in a batch maps back to the file.
// Only the top level's structure is checked here (the object, its keys, the array, the
// separators); everything inside a value is left to whoever parses it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace podscope::common {

struct TraceJsonSplitterOptions {
  size_t batch_bytes = 4 << 20;
  // A metadata member's value, or a single traceEvents element, larger than this is refused:
  // either would be held whole.
  size_t max_piece_bytes = 256 << 20;
};

// Errors carry the document offset they happened at (`error_offset()`), and stop the split.
class TraceJsonSplitter {
 public:
  struct Sink {
    // A top-level member other than traceEvents: its key as written between the quotes, its
    // value's text, and the offset of that text's first byte.
    std::function<absl::Status(std::string_view key, std::string_view value, uint64_t offset)>
        member;
    // Whether a member's value is needed whole. One that is not, and is larger than
    // max_piece_bytes, is scanned and never handed over (nor refused). Null: every one is needed.
    std::function<bool(std::string_view key)> must_keep;
    // traceEvents opens (at `offset`, its '['); it may appear more than once, which is for the
    // sink to judge.
    std::function<absl::Status(uint64_t offset)> events_begin;
    // A batch of elements: "[...]" followed by `kBatchPadding` readable bytes; `offset` is the
    // document offset of batch[1].
    std::function<absl::Status(std::string_view batch, uint64_t offset)> events;
    // traceEvents closes.
    std::function<absl::Status()> events_end;
  };
  static constexpr size_t kBatchPadding = 64;

  TraceJsonSplitter(TraceJsonSplitterOptions options, Sink sink);

  // The next bytes of the document. After an error nothing more is accepted.
  absl::Status Feed(std::string_view block);
  // The document has ended: an error unless its object closed.
  absl::Status Finish();

  uint64_t bytes_fed() const { return offset_; }
  // Where the last error was found (the document's size for one at its end).
  uint64_t error_offset() const { return error_offset_; }

 private:
  enum class State : uint8_t {
    kBeforeRoot,     // whitespace, then '{'
    kKeyOrClose,     // right after '{': a key or '}'
    kKey,            // in a key's string
    kColon,          // after a key
    kValueStart,     // after ':'
    kValue,          // in a metadata member's value
    kEvents,         // in traceEvents
    kCommaOrClose,   // after a member's value
    kKeyAfterComma,  // after ',': a key
    kAfterRoot,      // after the closing '}': whitespace only
  };

  absl::Status Fail(uint64_t at, std::string_view what);
  // The sink's answer; an error stops the split there, at `at`.
  absl::Status Stopped(absl::Status status, uint64_t at);
  // Scans a value's text from block[i]; returns the index after the value's end, or
  // block.size() when it goes on into the next block.
  absl::Status ScanValue(std::string_view block, size_t* i);
  absl::Status ScanEvents(std::string_view block, size_t* i);
  absl::Status FlushBatch(uint64_t at, bool last);
  // Appends unless `to` would pass `limit`: then an error at `from` naming `what`.
  absl::Status AppendCapped(std::string* to, std::string_view bytes, size_t limit, uint64_t from,
                            std::string_view what);
  absl::Status AppendToBatch(std::string_view bytes);

  TraceJsonSplitterOptions options_;
  Sink sink_;
  State state_ = State::kBeforeRoot;
  uint64_t offset_ = 0;  // document offset of the current block's first byte
  uint64_t error_offset_ = 0;
  bool failed_ = false;

  std::string key_;
  bool key_escape_ = false;

  // Inside a value or traceEvents: nesting below it, and string state.
  int64_t depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  bool scalar_ = false;  // a metadata value that is a number or literal, ended by , } or space

  std::string value_;
  uint64_t value_offset_ = 0;
  bool keep_value_ = true;  // false: a large member nobody needs, scanned only

  std::string batch_;          // "[" then the elements so far (no closing bracket yet)
  uint64_t batch_offset_ = 0;  // document offset of batch_[1]
  bool events_split_ = false;  // a batch has been handed over since traceEvents opened
};

}  // namespace podscope::common
