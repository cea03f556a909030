#include "common/kineto/trace_json_splitter.h"

#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::common {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Sixty-four bytes classified at once, a bit per byte (bit k is byte k).
struct ByteMasks {
  uint64_t quote = 0, backslash = 0, open = 0, close = 0, comma = 0;
};

ByteMasks Classify(const char* p) {
  ByteMasks m;
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  // '[' and '{' differ only in bit 0x20, as do ']' and '}'.
  const __m128i case_bit = _mm_set1_epi8(0x20);
  const __m128i open = _mm_set1_epi8('{');
  const __m128i close = _mm_set1_epi8('}');
  const __m128i comma = _mm_set1_epi8(',');
  for (int part = 0; part < 4; ++part) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * part));
    const __m128i folded = _mm_or_si128(v, case_bit);
    const auto bits = [part](__m128i hit) {
      return static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(hit))) << (16 * part);
    };
    m.quote |= bits(_mm_cmpeq_epi8(v, quote));
    m.backslash |= bits(_mm_cmpeq_epi8(v, backslash));
    m.open |= bits(_mm_cmpeq_epi8(folded, open));
    m.close |= bits(_mm_cmpeq_epi8(folded, close));
    m.comma |= bits(_mm_cmpeq_epi8(v, comma));
  }
#else
  for (int k = 0; k < 64; ++k) {
    const uint64_t bit = uint64_t{1} << k;
    switch (p[k]) {
      case '"':
        m.quote |= bit;
        break;
      case '\\':
        m.backslash |= bit;
        break;
      case '{':
      case '[':
        m.open |= bit;
        break;
      case '}':
      case ']':
        m.close |= bit;
        break;
      case ',':
        m.comma |= bit;
        break;
      default:
        break;
    }
  }
#endif
  return m;
}

// Bit k set when an odd number of bits at or below k are: with quotes, the bytes inside strings
// (the opening quote in, the closing one out).
uint64_t PrefixXor(uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}

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

absl::Status TraceJsonSplitter::Stopped(absl::Status status, uint64_t at) {
  if (!status.ok()) {
    failed_ = true;
    error_offset_ = at;
  }
  return status;
}

absl::Status TraceJsonSplitter::AppendCapped(std::string* to, std::string_view bytes, size_t limit,
                                             uint64_t from, std::string_view what) {
  if (to->size() + bytes.size() > limit) {
    failed_ = true;
    error_offset_ = from;
    return absl::ResourceExhaustedError(
        StrCat(what, " is larger than the limit of ", options_.max_piece_bytes, " bytes"));
  }
  to->append(bytes);
  return absl::OkStatus();
}

absl::Status TraceJsonSplitter::AppendToBatch(std::string_view bytes) {
  // A batch holds up to batch_bytes, then whatever element it is in when that is reached.
  return AppendCapped(&batch_, bytes, options_.batch_bytes + options_.max_piece_bytes,
                      batch_offset_, "a traceEvents element");
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
        for (size_t k = i; k < j; ++k) {
          if (static_cast<unsigned char>(block[k]) < 0x20)
            return Fail(offset_ + k, "malformed top-level object: a control character in a key");
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
          if (sink_.events_begin)
            RETURN_IF_ERROR(Stopped(sink_.events_begin(offset_ + i), offset_ + i));
          batch_ = "[";
          batch_offset_ = offset_ + i + 1;
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
        keep_value_ = true;
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
  if (keep_value_ && value_.size() + (j - start) > options_.max_piece_bytes && sink_.must_keep &&
      !sink_.must_keep(key_)) {
    // A member nobody reads (systemTraceEvents, stackFrames) may be large: scanned, not kept.
    keep_value_ = false;
    value_.clear();
    value_.shrink_to_fit();
  }
  if (keep_value_) {
    RETURN_IF_ERROR(AppendCapped(&value_, block.substr(start, j - start), options_.max_piece_bytes,
                                 value_offset_, StrCat("the value of \"", key_, "\"")));
  }
  *i = j;
  if (!done) return absl::OkStatus();
  state_ = State::kCommaOrClose;
  if (sink_.member && keep_value_)
    RETURN_IF_ERROR(Stopped(sink_.member(key_, value_, value_offset_), value_offset_));
  value_.clear();
  return absl::OkStatus();
}

absl::Status TraceJsonSplitter::ScanEvents(std::string_view block, size_t* i) {
  const char* p = block.data();
  const size_t n = block.size();
  size_t segment = *i;  // the bytes from here on are not in batch_ yet
  bool closed = false;
  // One structural byte outside strings; sets `closed` when it is traceEvents' closing bracket.
  const auto structural = [&](size_t at) -> absl::Status {
    switch (p[at]) {
      case '{':
      case '[':
        ++depth_;
        return absl::OkStatus();
      case '}':
      case ']':
        if (depth_ > 0) {
          --depth_;
          return absl::OkStatus();
        }
        if (p[at] == '}')
          return Fail(offset_ + at, "traceEvents: '}' where the array should close");
        RETURN_IF_ERROR(AppendToBatch(block.substr(segment, at - segment)));
        RETURN_IF_ERROR(FlushBatch(offset_ + at, /*last=*/true));
        closed = true;
        segment = at + 1;
        return absl::OkStatus();
      case ',':
        // Between elements, once the batch is full: hand it over.
        if (depth_ == 0 && batch_.size() + (at - segment) >= options_.batch_bytes) {
          RETURN_IF_ERROR(AppendToBatch(block.substr(segment, at - segment)));
          RETURN_IF_ERROR(FlushBatch(offset_ + at, /*last=*/false));
          segment = at + 1;
          batch_offset_ = offset_ + at + 1;
        }
        return absl::OkStatus();
      default:
        return absl::OkStatus();
    }
  };

  size_t j = *i;
  while (j < n && !closed) {
    // Most of a trace: 64 bytes at a time, with no backslash in them, so that the quotes alone
    // say which bytes are inside strings. Only the brackets are looked at one by one, and the
    // commas too once the batch is full.
    if (!escape_ && j + 64 <= n) {
      const ByteMasks m = Classify(p + j);
      if (m.backslash == 0) {
        const uint64_t inside = PrefixXor(m.quote) ^ (in_string_ ? ~uint64_t{0} : 0);
        in_string_ = (inside >> 63) != 0;
        uint64_t bits = (m.open | m.close | m.comma) & ~inside;
        const bool full = batch_.size() + (j + 64 - segment) >= options_.batch_bytes;
        if (!full) bits &= ~m.comma;
        while (bits != 0 && !closed) {
          const size_t at = j + static_cast<size_t>(__builtin_ctzll(bits));
          bits &= bits - 1;
          RETURN_IF_ERROR(structural(at));
          // A batch was handed over: the next one may not be full within these bytes.
          if (segment == at + 1 && batch_.size() + (j + 64 - segment) < options_.batch_bytes)
            bits &= ~m.comma;
        }
        if (closed) break;
        j += 64;
        continue;
      }
    }
    // Byte by byte, to the next 64-byte boundary or the block's end.
    const size_t end = std::min(n, j + 64);
    for (; j < end && !closed; ++j) {
      const char c = p[j];
      if (in_string_) {
        if (escape_) {
          escape_ = false;
        } else if (c == '\\') {
          escape_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
      } else if (c == '"') {
        in_string_ = true;
      } else {
        RETURN_IF_ERROR(structural(j));
      }
    }
  }
  if (closed) {
    if (sink_.events_end) RETURN_IF_ERROR(Stopped(sink_.events_end(), offset_ + segment - 1));
    state_ = State::kCommaOrClose;
    *i = segment;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(AppendToBatch(block.substr(segment)));
  *i = n;
  return absl::OkStatus();
}

absl::Status TraceJsonSplitter::FlushBatch(uint64_t at, bool last) {
  if (batch_.find_first_not_of(" \t\n\r", 1) == std::string::npos) {
    // "[]" is an empty array; "[e," then "]", or a comma with nothing before it, is malformed.
    if (!last || events_split_) return Fail(at, "traceEvents: an element is missing around a ','");
    return absl::OkStatus();
  }
  const size_t size = batch_.size() + 1;
  batch_ += ']';
  batch_.append(kBatchPadding, '\0');
  if (sink_.events) {
    RETURN_IF_ERROR(
        Stopped(sink_.events(std::string_view(batch_.data(), size), batch_offset_), at));
  }
  batch_.assign("[");
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
