#include "common/kineto/trace_json_splitter.h"

#include <utility>

#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::common {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Keys longer than this are no key the importer knows: the rest is scanned but not kept.
constexpr size_t kMaxKeptKeyBytes = 256;

}  // namespace

TraceJsonSplitter::TraceJsonSplitter(TraceJsonSplitterOptions options, Sink sink)
    : options_(options), sink_(std::move(sink)) {}

absl::Status TraceJsonSplitter::Fail(uint64_t at, std::string_view what) {
  failed_ = true;
  error_offset_ = at;
  return absl::InvalidArgumentError(std::string(what));
}

absl::Status TraceJsonSplitter::AppendCapped(std::string* to, std::string_view bytes,
                                             std::string_view what) {
  if (to->size() + bytes.size() > options_.max_piece_bytes + options_.batch_bytes) {
    failed_ = true;
    error_offset_ = offset_;
    return absl::ResourceExhaustedError(
        StrCat(what, " is larger than the limit of ", options_.max_piece_bytes, " bytes"));
  }
  to->append(bytes);
  return absl::OkStatus();
}

absl::Status TraceJsonSplitter::Feed(std::string_view block) {
  if (failed_) return absl::FailedPreconditionError("the document already failed");
  size_t i = 0;
  while (i < block.size()) {
    const char c = block[i];
    switch (state_) {
      case State::kBeforeRoot:
        if (c == '{') {
          state_ = State::kKeyOrClose;
        } else if (!IsSpace(c)) {
          return Fail(offset_ + i, "the top level must be a JSON object with a traceEvents array");
        }
        ++i;
        break;
      case State::kKeyOrClose:
      case State::kKeyAfterComma:
        if (c == '"') {
          key_.clear();
          key_escape_ = false;
          state_ = State::kKey;
        } else if (c == '}' && state_ == State::kKeyOrClose) {
          state_ = State::kAfterRoot;
        } else if (!IsSpace(c)) {
          return Fail(offset_ + i, "malformed top-level object: expected a key");
        }
        ++i;
        break;
      case State::kKey: {
        size_t j = i;
        bool closed = false;
        for (; j < block.size(); ++j) {
          if (key_escape_) {
            key_escape_ = false;
          } else if (block[j] == '\\') {
            key_escape_ = true;
          } else if (block[j] == '"') {
            closed = true;
            break;
          }
        }
        if (key_.size() < kMaxKeptKeyBytes)
          key_.append(block.substr(i, std::min(j - i, kMaxKeptKeyBytes - key_.size())));
        if (closed) state_ = State::kColon;
        i = closed ? j + 1 : j;
        break;
      }
      case State::kColon:
        if (c == ':') {
          state_ = State::kValueStart;
        } else if (!IsSpace(c)) {
          return Fail(offset_ + i, "malformed top-level object: expected ':' after a key");
        }
        ++i;
        break;
      case State::kValueStart:
        if (IsSpace(c)) {
          ++i;
          break;
        }
        depth_ = 0;
        in_string_ = false;
        escape_ = false;
        if (key_ == "traceEvents") {
          if (c != '[') return Fail(offset_ + i, "traceEvents must be an array");
          if (sink_.events_begin) {
            if (absl::Status s = sink_.events_begin(offset_ + i); !s.ok()) {
              failed_ = true;
              error_offset_ = offset_ + i;
              return s;
            }
          }
          batch_ = "[";
          batch_offset_ = offset_ + i + 1;
          batch_has_element_ = false;
          events_split_ = false;
          state_ = State::kEvents;
          ++i;
          break;
        }
        if (c == ',' || c == '}') {
          return Fail(offset_ + i, "malformed top-level object: a key without a value");
        }
        value_.clear();
        value_offset_ = offset_ + i;
        scalar_ = c != '{' && c != '[' && c != '"';
        state_ = State::kValue;
        break;
      case State::kValue:
        RETURN_IF_ERROR(ScanValue(block, &i));
        break;
      case State::kEvents:
        RETURN_IF_ERROR(ScanEvents(block, &i));
        break;
      case State::kCommaOrClose:
        if (c == ',') {
          state_ = State::kKeyAfterComma;
        } else if (c == '}') {
          state_ = State::kAfterRoot;
        } else if (!IsSpace(c)) {
          return Fail(offset_ + i, "malformed top-level object: expected ',' or '}'");
        }
        ++i;
        break;
      case State::kAfterRoot:
        if (!IsSpace(c)) return Fail(offset_ + i, "unexpected content after the top-level object");
        ++i;
        break;
    }
  }
  offset_ += block.size();
  return absl::OkStatus();
}

absl::Status TraceJsonSplitter::ScanValue(std::string_view block, size_t* i) {
  const size_t start = *i;
  size_t j = start;
  bool done = false;
  if (scalar_) {
    for (; j < block.size(); ++j) {
      const char c = block[j];
      if (c == ',' || c == '}' || IsSpace(c)) {
        done = true;
        break;
      }
    }
  } else {
    for (; j < block.size(); ++j) {
      const char c = block[j];
      if (in_string_) {
        if (escape_) {
          escape_ = false;
        } else if (c == '\\') {
          escape_ = true;
        } else if (c == '"') {
          in_string_ = false;
          if (depth_ == 0) {
            ++j;
            done = true;
            break;
          }
        }
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if (c == '}' || c == ']') {
        if (--depth_ == 0) {
          ++j;
          done = true;
          break;
        }
      }
    }
  }
  RETURN_IF_ERROR(
      AppendCapped(&value_, block.substr(start, j - start), StrCat("the value of \"", key_, "\"")));
  *i = j;
  if (!done) return absl::OkStatus();
  state_ = State::kCommaOrClose;
  if (sink_.member) {
    if (absl::Status s = sink_.member(key_, value_, value_offset_); !s.ok()) {
      failed_ = true;
      error_offset_ = value_offset_;
      return s;
    }
  }
  value_.clear();
  return absl::OkStatus();
}

absl::Status TraceJsonSplitter::ScanEvents(std::string_view block, size_t* i) {
  size_t segment = *i;  // the bytes from here on are not in batch_ yet
  for (size_t j = *i; j < block.size(); ++j) {
    const char c = block[j];
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string_ = true;
        batch_has_element_ = true;
        break;
      case '{':
      case '[':
        ++depth_;
        batch_has_element_ = true;
        break;
      case '}':
      case ']':
        if (depth_ > 0) {
          --depth_;
          break;
        }
        if (c == '}') return Fail(offset_ + j, "traceEvents: '}' where the array should close");
        RETURN_IF_ERROR(
            AppendCapped(&batch_, block.substr(segment, j - segment), "a traceEvents element"));
        RETURN_IF_ERROR(FlushBatch(offset_ + j, /*last=*/true));
        if (sink_.events_end) {
          if (absl::Status s = sink_.events_end(); !s.ok()) {
            failed_ = true;
            error_offset_ = offset_ + j;
            return s;
          }
        }
        state_ = State::kCommaOrClose;
        *i = j + 1;
        return absl::OkStatus();
      case ',':
        if (depth_ == 0 && batch_.size() + (j - segment) >= options_.batch_bytes) {
          RETURN_IF_ERROR(
              AppendCapped(&batch_, block.substr(segment, j - segment), "a traceEvents element"));
          RETURN_IF_ERROR(FlushBatch(offset_ + j, /*last=*/false));
          segment = j + 1;
          batch_offset_ = offset_ + j + 1;
        }
        break;
      default:
        if (!IsSpace(c)) batch_has_element_ = true;
        break;
    }
  }
  RETURN_IF_ERROR(AppendCapped(&batch_, block.substr(segment), "a traceEvents element"));
  *i = block.size();
  return absl::OkStatus();
}

absl::Status TraceJsonSplitter::FlushBatch(uint64_t at, bool last) {
  if (!batch_has_element_) {
    // "[]" is an empty array; "[e," then "]", or a comma with nothing before it, is malformed.
    if (!last || events_split_) return Fail(at, "traceEvents: an element is missing around a ','");
    return absl::OkStatus();
  }
  const size_t size = batch_.size() + 1;
  batch_ += ']';
  batch_.append(kBatchPadding, '\0');
  if (sink_.events) {
    if (absl::Status s = sink_.events(std::string_view(batch_.data(), size), batch_offset_);
        !s.ok()) {
      failed_ = true;
      error_offset_ = at;
      return s;
    }
  }
  batch_.assign("[");
  batch_has_element_ = false;
  events_split_ = true;
  return absl::OkStatus();
}

absl::Status TraceJsonSplitter::Finish() {
  if (failed_) return absl::FailedPreconditionError("the document already failed");
  if (state_ == State::kAfterRoot) return absl::OkStatus();
  if (state_ == State::kBeforeRoot) return Fail(offset_, "not valid JSON: the document is empty");
  return Fail(offset_, "not valid JSON: the document ends before its top-level object closes");
}

}  // namespace podscope::common
