#include "common/kineto/kineto_importer.h"

#include <simdjson.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "common/kineto/decimal_time.h"
#include "common/kineto/trace_json_splitter.h"
#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::common {
namespace od = simdjson::ondemand;

class KinetoImporter::Impl {
 public:
  explicit Impl(ImportOptions options) : options_(options) {}
  const ImportOptions& options() const { return options_; }

  absl::StatusOr<ImportResult> ImportJson(std::string_view source, std::string_view json) {
    return Import(source, [json](const std::function<absl::Status(std::string_view)>& feed) {
      return feed(json);
    });
  }

  absl::StatusOr<ImportResult> ImportFile(const std::string& path) {
    ASSIGN_OR_RETURN(FileBlockReader reader, FileBlockReader::Open(path, options_.read));
    return Import(path, [&reader](const std::function<absl::Status(std::string_view)>& feed) {
      while (true) {
        ASSIGN_OR_RETURN(const std::string_view block, reader.Next());
        if (block.empty()) return absl::OkStatus();
        RETURN_IF_ERROR(feed(block));
      }
    });
  }

 private:
  using Blocks =
      std::function<absl::Status(const std::function<absl::Status(std::string_view)>& feed)>;

  // The document arrives a block at a time and is parsed a piece at a time (see
  // TraceJsonSplitter): memory holds one batch of events besides the traces being built.
  absl::StatusOr<ImportResult> Import(std::string_view source, const Blocks& blocks) {
    Reset(source);
    TraceJsonSplitterOptions split;
    split.max_piece_bytes = std::max<size_t>(options_.max_string_bytes * 4, 64 << 20);
    TraceJsonSplitter splitter(split, Sink());
    absl::Status status = blocks([&](std::string_view block) {
      if (absl::Status s = splitter.Feed(block); !s.ok()) return SplitError(splitter, s);
      return absl::OkStatus();
    });
    if (status.ok()) {
      if (absl::Status s = splitter.Finish(); !s.ok()) status = SplitError(splitter, s);
    }
    if (status.ok() && !saw_events_) {
      event_index_ = 0;
      status =
          FailAt(splitter.bytes_fed(), "no traceEvents array: not a Chrome-trace / Kineto file");
    }
    if (!status.ok()) {
      result_ = ImportResult{};
      builders_.clear();
      return status;
    }
    for (TraceBuilder& b : builders_) b.Finish();
    builders_.clear();
    for (WorkerTrace& w : result_.workers) w.info.source = std::string(source);
    result_.json_bytes = splitter.bytes_fed();
    return std::move(result_);
  }

  void Reset(std::string_view source) {
    source_ = source;
    doc_ = nullptr;
    event_index_ = 0;
    saw_events_ = false;
    podscope_export_ = false;
    base_time_ns_ = 0;
    pid_to_worker_.clear();
    result_ = ImportResult{};
    builders_.clear();
    sink_error_ = absl::OkStatus();
  }

  TraceJsonSplitter::Sink Sink() {
    TraceJsonSplitter::Sink sink;
    sink.member = [this](std::string_view key, std::string_view value, uint64_t offset) {
      return Keep(OnMember(key, value, offset));
    };
    sink.must_keep = [](std::string_view key) {
      return key == "distributedInfo" || key == "deviceProperties" || key == "podscope";
    };
    sink.events_begin = [this](uint64_t offset) {
      if (saw_events_) return Keep(FailAt(offset, "traceEvents appears twice"));
      saw_events_ = true;
      if (!podscope_export_) EnsureSingleWorker();
      return absl::OkStatus();
    };
    sink.events = [this](std::string_view batch, uint64_t offset) {
      return Keep(OnEvents(batch, offset));
    };
    sink.events_end = [this] {
      event_index_ = 0;
      return absl::OkStatus();
    };
    return sink;
  }

  // The sink's errors are whole (file, offset, reason); the splitter's own need those added.
  absl::Status Keep(absl::Status status) {
    if (!status.ok()) sink_error_ = status;
    return status;
  }
  absl::Status SplitError(const TraceJsonSplitter& splitter, const absl::Status& status) {
    if (!sink_error_.ok()) return sink_error_;
    return absl::Status(status.code(), StrCat(source_, ": byte offset ", splitter.error_offset(),
                                              ": ", status.message()));
  }

  absl::Status FailAt(uint64_t offset, std::string_view what,
                      absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    std::string reason(what);
    if (event_index_ > 0) reason = StrCat("traceEvents[", event_index_ - 1, "]: ", reason);
    return absl::Status(code, StrCat(source_, ": byte offset ", offset, ": ", reason));
  }

  // An error at the parser's current position in the piece being parsed.
  absl::Status Fail(std::string_view what, simdjson::error_code code = simdjson::SUCCESS) {
    uint64_t offset = doc_offset_ + doc_size_;
    const char* at = nullptr;
    if (doc_ != nullptr && doc_->current_location().get(at) == simdjson::SUCCESS &&
        at >= doc_base_ && at <= doc_base_ + doc_size_) {
      offset = doc_offset_ + static_cast<uint64_t>(at - doc_base_);
    }
    std::string reason(what);
    if (code != simdjson::SUCCESS) StrAppend(&reason, " (", simdjson::error_message(code), ")");
    return FailAt(offset, reason,
                  code == simdjson::CAPACITY ? absl::StatusCode::kResourceExhausted
                                             : absl::StatusCode::kInvalidArgument);
  }

  // Parses `text` (followed by SIMDJSON_PADDING readable bytes), which starts at document offset
  // `offset`, as one JSON document, and hands it to `parse`. `first_byte` is the document offset
  // of its first byte that is the document's (a batch's '[' is the splitter's).
  absl::Status ParsePiece(std::string_view text, uint64_t offset, uint64_t first_byte,
                          const std::function<absl::Status()>& parse) {
    // simdjson sizes its buffers to the document exactly, so every piece a little larger than
    // the last would take fresh ones, which the kernel zeroes: a quarter more leaves room.
    if (parser_.capacity() < text.size()) {
      const size_t room = std::min(text.size() + text.size() / 4, parser_.max_capacity());
      [[maybe_unused]] const simdjson::error_code ignored =
          parser_.allocate(room, parser_.max_depth());
    }
    doc_base_ = text.data();
    doc_size_ = text.size();
    doc_offset_ = offset;
    od::document doc;
    absl::Status status;
    if (auto err = parser_
                       .iterate(simdjson::padded_string_view(
                           text.data(), text.size(), text.size() + simdjson::SIMDJSON_PADDING))
                       .get(doc);
        err) {
      // Found before any element is read (invalid UTF-8, a raw control character in a string):
      // no element is to blame, the piece's span is named.
      const uint64_t index = event_index_;
      event_index_ = 0;
      status =
          FailAt(first_byte, StrCat("not valid JSON somewhere before byte offset ",
                                    offset + text.size(), " (", simdjson::error_message(err), ")"));
      event_index_ = index;
    } else {
      doc_ = &doc;
      status = parse();
      if (status.ok()) {
        const char* trailing = nullptr;
        if (doc_->current_location().get(trailing) == simdjson::SUCCESS)
          status = Fail("unexpected content after the value");
      }
    }
    doc_ = nullptr;
    return status;
  }

  absl::Status OnMember(std::string_view key, std::string_view value, uint64_t offset) {
    // Every member is checked whole, read or not, as the whole file once was: On-Demand checks
    // only what it reads, and the splitter only the top level. In an array, so that a scalar is
    // a value too.
    const std::string what = StrCat("\"", key.substr(0, 64), "\": not valid JSON");
    member_.assign("[");
    member_.append(value);
    member_.append("]");
    member_.append(simdjson::SIMDJSON_PADDING, '\0');
    RETURN_IF_ERROR(ParsePiece(std::string_view(member_.data(), value.size() + 2), offset - 1,
                               offset, [&]() -> absl::Status {
                                 od::array wrapped;
                                 if (auto err = doc_->get_array().get(wrapped); err)
                                   return Fail(what, err);
                                 for (auto element : wrapped) {
                                   od::value v;
                                   if (auto err = std::move(element).get(v); err)
                                     return Fail(what, err);
                                   RETURN_IF_ERROR(ReadWhole(v, what));
                                 }
                                 return absl::OkStatus();
                               }));
    member_.assign(value);
    member_.append(simdjson::SIMDJSON_PADDING, '\0');
    if (podscope_export_)
      return absl::OkStatus();  // a merged export describes its workers in "podscope" only
    const bool distributed = key == "distributedInfo";
    const bool device = key == "deviceProperties";
    const bool podscope = key == "podscope";
    if (!distributed && !device && !podscope) return absl::OkStatus();
    if (podscope && saw_events_)
      return FailAt(offset, "podscope metadata must precede traceEvents");
    return ParsePiece(std::string_view(member_.data(), value.size()), offset, offset,
                      [&]() -> absl::Status {
                        od::value v;
                        if (auto err = doc_->get_value().get(v); err)
                          return Fail("not valid JSON", err);
                        if (distributed) return ParseDistributedInfo(v);
                        if (device) return ParseDeviceProperties(v);
                        return ParsePodscopeMetadata(v);
                      });
  }

  // Reads every part of `v`, which is how On-Demand checks a value (skipping one checks little).
  // The recursion is bounded by the parser's depth limit.
  absl::Status ReadWhole(od::value& v, std::string_view what) {
    od::json_type type;
    if (auto err = v.type().get(type); err) return Fail(what, err);
    switch (type) {
      case od::json_type::object: {
        od::object object;
        if (auto err = v.get_object().get(object); err) return Fail(what, err);
        for (auto field_result : object) {
          od::field field;
          if (auto err = std::move(field_result).get(field); err) return Fail(what, err);
          std::string_view key;
          if (auto err = field.unescaped_key().get(key); err) return Fail(what, err);
          od::value child = field.value();
          RETURN_IF_ERROR(ReadWhole(child, what));
        }
        return absl::OkStatus();
      }
      case od::json_type::array: {
        od::array array;
        if (auto err = v.get_array().get(array); err) return Fail(what, err);
        for (auto element : array) {
          od::value child;
          if (auto err = std::move(element).get(child); err) return Fail(what, err);
          RETURN_IF_ERROR(ReadWhole(child, what));
        }
        return absl::OkStatus();
      }
      case od::json_type::string: {
        std::string_view s;
        if (auto err = v.get_string().get(s); err) return Fail(what, err);
        return absl::OkStatus();
      }
      case od::json_type::number: {
        od::number n;
        if (auto err = v.get_number().get(n); err) return Fail(what, err);
        return absl::OkStatus();
      }
      case od::json_type::boolean: {
        bool b = false;
        if (auto err = v.get_bool().get(b); err) return Fail(what, err);
        return absl::OkStatus();
      }
      case od::json_type::null: {
        bool null = false;
        if (auto err = v.is_null().get(null); err || !null) return Fail(what, err);
        return absl::OkStatus();
      }
    }
    return Fail(what);
  }

  absl::Status OnEvents(std::string_view batch, uint64_t offset) {
    // batch[0] is the '[' the splitter put before the element at `offset`.
    return ParsePiece(batch, offset - 1, offset, [&]() -> absl::Status {
      od::array events;
      if (auto err = doc_->get_array().get(events); err)
        return Fail("traceEvents must be an array", err);
      return ParseEvents(events);
    });
  }

  WorkerTrace& EnsureSingleWorker() {
    if (result_.workers.empty()) {
      result_.workers.emplace_back();
      builders_.emplace_back(&result_.workers.back());
    }
    return result_.workers.front();
  }

  // ---- values -------------------------------------------------------------------------

  absl::Status GetString(od::value& v, std::string_view what, std::string_view* out) {
    // Most trace strings have no escapes: then the text between the quotes in the input is
    // the string, and copying it out (unescaping) can be skipped. The input was validated as
    // UTF-8 and its structure indexed by simdjson before this runs.
    std::string_view token = v.raw_json_token();
    while (!token.empty() && (token.back() == ' ' || token.back() == '\n' || token.back() == '\r' ||
                              token.back() == '\t')) {
      token.remove_suffix(1);
    }
    if (token.size() >= 2 && token.front() == '"' && token.back() == '"' &&
        std::memchr(token.data() + 1, '\\', token.size() - 2) == nullptr) {
      *out = token.substr(1, token.size() - 2);
    } else if (auto err = v.get_string().get(*out); err) {
      return Fail(StrCat(what, ": expected a string"), err);
    }
    if (out->size() > options_.max_string_bytes) {
      return Fail(StrCat(what, ": string of ", out->size(), " bytes exceeds the limit of ",
                         options_.max_string_bytes));
    }
    return absl::OkStatus();
  }

  // A device limit: a count that fits an int32 and is not negative.
  absl::Status GetLimit(od::value& v, std::string_view key, int32_t* out) {
    int64_t n = 0;
    RETURN_IF_ERROR(GetInt(v, StrCat("deviceProperties.", key), &n));
    if (n < 0 || n > std::numeric_limits<int32_t>::max())
      return Fail(StrCat("deviceProperties.", key, ": out of range"));
    *out = static_cast<int32_t>(n);
    return absl::OkStatus();
  }

  absl::Status GetInt(od::value& v, std::string_view what, int64_t* out) {
    // The common case first: an integer. Only on failure look at what the value is.
    if (v.get_int64().get(*out) == simdjson::SUCCESS) return absl::OkStatus();
    od::json_type type;
    if (auto err = v.type().get(type); err) return Fail(StrCat(what, ": bad value"), err);
    if (type != od::json_type::number) return Fail(StrCat(what, ": expected a number"));
    double d = 0;
    if (auto err = v.get_double().get(d); err) return Fail(StrCat(what, ": bad number"), err);
    if (!(std::fabs(d) < 9.2e18)) return Fail(StrCat(what, ": number out of range"));
    *out = std::llround(d);
    return absl::OkStatus();
  }

  // pid / tid: numbers, or strings (Kineto's "Spans" pseudo-process) which map to kAbsent.
  absl::Status GetId(od::value& v, std::string_view what, int64_t* out) {
    if (v.get_int64().get(*out) == simdjson::SUCCESS) return absl::OkStatus();
    od::json_type type;
    if (auto err = v.type().get(type); err) return Fail(StrCat(what, ": bad value"), err);
    if (type == od::json_type::string) {
      *out = kAbsent;
      return absl::OkStatus();
    }
    return GetInt(v, what, out);
  }

  absl::Status GetMicros(od::value& v, std::string_view what, int64_t* out) {
    // Straight from the number's text: exact, and cheaper than a double round trip. A token
    // that is not a number (string, object, ...) fails the decimal parser.
    const std::string_view token = v.raw_json_token();
    if (!ParseMicrosAsNanos(token, out)) {
      if (!token.empty() && (token[0] == '-' || (token[0] >= '0' && token[0] <= '9'))) {
        return Fail(StrCat(what, ": ", token.substr(0, 40), " is not a representable time"));
      }
      return Fail(StrCat(what, ": expected a number of microseconds"));
    }
    return absl::OkStatus();
  }

  absl::Status GetIntArray3(od::value& v, std::string_view what, int64_t out[3]) {
    od::array array;
    if (auto err = v.get_array().get(array); err)
      return Fail(StrCat(what, ": expected an array"), err);
    int i = 0;
    for (auto element : array) {
      od::value item;
      if (auto err = std::move(element).get(item); err) return Fail(what, err);
      int64_t n = 0;
      RETURN_IF_ERROR(GetInt(item, what, &n));
      if (i < 3) out[i] = n;
      ++i;
    }
    return absl::OkStatus();
  }

  // Kineto writes "Process Group Ranks" as a string "[0, 1]"; accept a real array too.
  absl::Status GetRankList(od::value& v, std::string_view* out) {
    od::json_type type;
    if (auto err = v.type().get(type); err) return Fail("Process Group Ranks: bad value", err);
    if (type == od::json_type::array) {
      od::array array;
      if (auto err = v.get_array().get(array); err) return Fail("Process Group Ranks", err);
      if (auto err = array.raw_json().get(*out); err) return Fail("Process Group Ranks", err);
      return absl::OkStatus();
    }
    return GetString(v, "Process Group Ranks", out);
  }

  // "Input Dims": [[2048], []] and "Input type": ["float", "Scalar"]: the element count and
  // type of the first non-scalar input, which is the tensor a collective moves.
  absl::Status ParseInputDims(od::value& v, RawCollectiveArgs* c, int* first_tensor) {
    od::array outer;
    if (auto err = v.get_array().get(outer); err) return Fail("Input Dims: expected an array", err);
    int index = 0;
    for (auto element : outer) {
      od::value item;
      if (auto err = std::move(element).get(item); err) return Fail("Input Dims", err);
      od::array dims;
      if (item.get_array().get(dims) != simdjson::SUCCESS) {
        ++index;
        continue;
      }
      int64_t product = 1;
      bool any = false;
      for (auto dim_result : dims) {
        od::value dim;
        if (auto err = std::move(dim_result).get(dim); err) return Fail("Input Dims", err);
        int64_t n = 0;
        if (dim.get_int64().get(n) != simdjson::SUCCESS) continue;
        product *= n;
        any = true;
      }
      if (any && *first_tensor < 0) {
        *first_tensor = index;
        c->input_elements = product;
      }
      ++index;
    }
    return absl::OkStatus();
  }

  // Into input_types_: zeroing a local array on every event's args costs more than it saves.
  absl::Status ParseInputTypes(od::value& v) {
    od::array array;
    if (auto err = v.get_array().get(array); err) return Fail("Input type: expected an array", err);
    input_type_count_ = 0;
    for (auto element : array) {
      od::value item;
      if (auto err = std::move(element).get(item); err) return Fail("Input type", err);
      if (input_type_count_ < kMaxInputTypes) {
        std::string_view& type = input_types_[input_type_count_++];
        if (item.get_string().get(type) != simdjson::SUCCESS) type = {};
      }
    }
    return absl::OkStatus();
  }

  // ---- events -------------------------------------------------------------------------

  absl::Status ParseArgs(od::value& v, bool comm_span, RawArgs* a) {
    od::object args;
    if (auto err = v.get_object().get(args); err) return Fail("args: expected an object", err);
    RawCollectiveArgs& c = a->collective;
    input_type_count_ = 0;
    int first_tensor = -1;
    for (auto field_result : args) {
      if (auto err = field_result.error(); err) return Fail("malformed args", err);
      // By reference: moving the field out costs a store-forwarding stall per field.
      od::field& field = field_result.value_unsafe();
      od::raw_json_string key = field.key();
      od::value& value = field.value();
      switch (key.raw()[0]) {
        case 'E':
          if (key.unsafe_is_equal("External id"))
            RETURN_IF_ERROR(GetInt(value, "External id", &a->external_id));
          break;
        case 'd':
          if (key.unsafe_is_equal("device"))
            RETURN_IF_ERROR(GetInt(value, "device", &a->device));
          else if (key.unsafe_is_equal("dtype"))
            RETURN_IF_ERROR(GetString(value, "dtype", &c.dtype));
          break;
        case 's':
          if (key.unsafe_is_equal("stream"))
            RETURN_IF_ERROR(GetInt(value, "stream", &a->stream));
          else if (key.unsafe_is_equal("shared memory"))
            RETURN_IF_ERROR(GetInt(value, "shared memory", &a->shared_memory));
          break;
        case 'c':
          if (key.unsafe_is_equal("correlation"))
            RETURN_IF_ERROR(GetInt(value, "correlation", &a->correlation));
          else if (key.unsafe_is_equal("communicator"))
            RETURN_IF_ERROR(GetString(value, "communicator", &c.communicator));
          else if (key.unsafe_is_equal("channels"))
            RETURN_IF_ERROR(GetInt(value, "channels", &c.channels));
          break;
        case 'b':
          if (key.unsafe_is_equal("bytes"))
            RETURN_IF_ERROR(GetInt(value, "bytes", &a->bytes));
          else if (key.unsafe_is_equal("block"))
            RETURN_IF_ERROR(GetIntArray3(value, "block", a->block));
          break;
        case 'g':
          if (key.unsafe_is_equal("grid")) RETURN_IF_ERROR(GetIntArray3(value, "grid", a->grid));
          break;
        case 'r':
          if (key.unsafe_is_equal("registers per thread"))
            RETURN_IF_ERROR(GetInt(value, "registers per thread", &a->registers));
          break;
        case 'n':
          if (key.unsafe_is_equal("name")) {
            // Only metadata events carry a string name in args; ignore other shapes.
            od::json_type type;
            if (value.type().get(type) == simdjson::SUCCESS && type == od::json_type::string) {
              RETURN_IF_ERROR(GetString(value, "args.name", &a->name));
            }
          }
          break;
        case 'a':
          if (key.unsafe_is_equal("algorithm"))
            RETURN_IF_ERROR(GetString(value, "algorithm", &c.algorithm));
          break;
        case 'p':
          if (key.unsafe_is_equal("protocol"))
            RETURN_IF_ERROR(GetString(value, "protocol", &c.protocol));
          break;
        case 'D':
          if (key.unsafe_is_equal("Device Id"))
            RETURN_IF_ERROR(GetInt(value, "Device Id", &a->memory_device_id));
          else if (key.unsafe_is_equal("Device Type"))
            RETURN_IF_ERROR(GetInt(value, "Device Type", &a->memory_device_type));
          break;
        case 'B':
          if (key.unsafe_is_equal("Bytes"))
            RETURN_IF_ERROR(GetInt(value, "Bytes", &a->memory_bytes));
          break;
        case 'T':
          if (key.unsafe_is_equal("Total Allocated"))
            RETURN_IF_ERROR(GetInt(value, "Total Allocated", &a->total_allocated));
          else if (key.unsafe_is_equal("Total Reserved"))
            RETURN_IF_ERROR(GetInt(value, "Total Reserved", &a->total_reserved));
          break;
        case 'C':
          if (key.unsafe_is_equal("Collective name")) {
            RETURN_IF_ERROR(GetString(value, "Collective name", &c.collective_name));
          } else if (key.unsafe_is_equal("Comms Id")) {
            // NCCL communicator hash (a number, or a string in some versions): identifies the
            // communicator when no process group name is given.
            c.comms_id = StripWhitespace(value.raw_json_token());
            if (c.comms_id.size() >= 2 && c.comms_id.front() == '"')
              c.comms_id = c.comms_id.substr(1, c.comms_id.size() - 2);
          }
          break;
        case 'I':
          if (key.unsafe_is_equal("In msg nelems")) {
            RETURN_IF_ERROR(GetInt(value, "In msg nelems", &c.in_nelems));
          } else if (comm_span && key.unsafe_is_equal("Input Dims")) {
            RETURN_IF_ERROR(ParseInputDims(value, &c, &first_tensor));
          } else if (comm_span && key.unsafe_is_equal("Input type")) {
            RETURN_IF_ERROR(ParseInputTypes(value));
          }
          break;
        case 'O':
          if (key.unsafe_is_equal("Out msg nelems"))
            RETURN_IF_ERROR(GetInt(value, "Out msg nelems", &c.out_nelems));
          break;
        case 'G':
          if (key.unsafe_is_equal("Group size"))
            RETURN_IF_ERROR(GetInt(value, "Group size", &c.group_size));
          break;
        case 'P':
          if (key.unsafe_is_equal("Process Group Name")) {
            od::json_type type;
            if (value.type().get(type) == simdjson::SUCCESS && type == od::json_type::number) {
              const std::string_view token = value.raw_json_token();
              c.group_name = token.substr(0, token.find_first_of(" \t\r\n,}"));
            } else {
              RETURN_IF_ERROR(GetString(value, "Process Group Name", &c.group_name));
            }
          } else if (key.unsafe_is_equal("Process Group Description")) {
            RETURN_IF_ERROR(GetString(value, "Process Group Description", &c.group_desc));
          } else if (key.unsafe_is_equal("Process Group Ranks")) {
            RETURN_IF_ERROR(GetRankList(value, &c.group_ranks));
          }
          break;
        case 'S':
          if (key.unsafe_is_equal("Seq")) RETURN_IF_ERROR(GetInt(value, "Seq", &c.seq));
          break;
        default:
          break;
      }
    }
    if (first_tensor >= 0 && first_tensor < input_type_count_)
      c.input_type = input_types_[first_tensor];
    return absl::OkStatus();
  }

  absl::Status ParseEvent(od::object& object, RawEvent* e) {
    for (auto field_result : object) {
      if (auto err = field_result.error(); err) return Fail("malformed event", err);
      // By reference: moving the field out costs a store-forwarding stall per field.
      od::field& field = field_result.value_unsafe();
      od::raw_json_string key = field.key();
      od::value& value = field.value();
      switch (key.raw()[0]) {
        case 'p':
          if (key.unsafe_is_equal("ph")) {
            std::string_view ph;
            RETURN_IF_ERROR(GetString(value, "ph", &ph));
            if (ph.size() != 1)
              return Fail(StrCat("ph: \"", ph.substr(0, 16), "\" is not an event phase"));
            e->ph = ph[0];
          } else if (key.unsafe_is_equal("pid")) {
            RETURN_IF_ERROR(GetId(value, "pid", &e->pid));
          }
          break;
        case 'c':
          if (key.unsafe_is_equal("cat")) RETURN_IF_ERROR(GetString(value, "cat", &e->cat));
          break;
        case 'n':
          if (key.unsafe_is_equal("name")) RETURN_IF_ERROR(GetString(value, "name", &e->name));
          break;
        case 't':
          if (key.unsafe_is_equal("ts")) {
            RETURN_IF_ERROR(GetMicros(value, "ts", &e->ts));
            if (e->ts > INT64_MAX - base_time_ns_)
              return Fail("ts: beyond the representable time after podscope.base_time_ns");
            e->ts += base_time_ns_;
          } else if (key.unsafe_is_equal("tid"))
            RETURN_IF_ERROR(GetId(value, "tid", &e->tid));
          break;
        case 'd':
          if (key.unsafe_is_equal("dur")) RETURN_IF_ERROR(GetMicros(value, "dur", &e->dur));
          break;
        case 'a':
          if (key.unsafe_is_equal("args")) {
            RETURN_IF_ERROR(ParseArgs(value, IsCommunicationOpName(e->name), &e->args));
          }
          break;
        default:
          break;
      }
    }
    if (e->ph == 0) return Fail("event has no ph (phase)");
    if (e->ph == 'X') {
      if (e->ts == kAbsent) return Fail("complete event has no ts");
      if (e->dur == kAbsent) return Fail("complete event has no dur");
      if (e->dur < 0) return Fail("complete event has a negative dur");
    }
    return absl::OkStatus();
  }

  absl::Status ParseEvents(od::array& events) {
    for (auto element : events) {
      ++event_index_;
      if (event_index_ > options_.max_events) {
        return absl::ResourceExhaustedError(
            StrCat(source_, ": more than ", options_.max_events, " events (the per-file limit)"));
      }
      od::value item;
      if (auto err = std::move(element).get(item); err) return Fail("malformed event", err);
      od::object object;
      if (auto err = item.get_object().get(object); err)
        return Fail("event must be an object", err);
      RawEvent event;
      RETURN_IF_ERROR(ParseEvent(object, &event));
      size_t worker = 0;
      if (podscope_export_ && event.ph != 'M') {
        auto it = pid_to_worker_.find(event.pid);
        if (it == pid_to_worker_.end()) {
          return Fail(StrCat("pid ",
                             event.pid == kAbsent ? std::string("(string)") : StrCat(event.pid),
                             " is not one of the workers declared in podscope.workers"));
        }
        worker = it->second;
      } else if (podscope_export_) {
        auto it = pid_to_worker_.find(event.pid);
        if (it == pid_to_worker_.end()) continue;  // metadata of unknown pids carries nothing
        worker = it->second;
      }
      builders_[worker].Add(event, &result_.stats);
    }
    return absl::OkStatus();
  }

  // ---- top-level metadata -------------------------------------------------------------

  absl::Status ParseDistributedInfo(od::value& value) {
    od::object info;
    if (auto err = value.get_object().get(info); err)
      return Fail("distributedInfo must be an object", err);
    WorkerInfo& w = EnsureSingleWorker().info;
    for (auto field_result : info) {
      od::field field;
      if (auto err = std::move(field_result).get(field); err)
        return Fail("malformed distributedInfo", err);
      od::raw_json_string key = field.key();
      od::value v = field.value();
      int64_t n = 0;
      if (key.unsafe_is_equal("rank")) {
        RETURN_IF_ERROR(GetInt(v, "distributedInfo.rank", &n));
        w.rank = static_cast<int32_t>(n);
      } else if (key.unsafe_is_equal("world_size")) {
        RETURN_IF_ERROR(GetInt(v, "distributedInfo.world_size", &n));
        w.world_size = static_cast<int32_t>(n);
      } else if (key.unsafe_is_equal("backend")) {
        std::string_view s;
        RETURN_IF_ERROR(GetString(v, "distributedInfo.backend", &s));
        w.backend = std::string(s);
      } else if (key.unsafe_is_equal("pg_config")) {
        RETURN_IF_ERROR(ParseProcessGroups(v, &w));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseProcessGroups(od::value& value, WorkerInfo* w) {
    od::array groups;
    if (value.get_array().get(groups) != simdjson::SUCCESS)
      return absl::OkStatus();  // older dict form
    for (auto element : groups) {
      od::object group;
      if (auto err = element.get_object().get(group); err)
        return Fail("pg_config entry must be an object", err);
      ProcessGroupInfo pg;
      for (auto field_result : group) {
        od::field field;
        if (auto err = std::move(field_result).get(field); err)
          return Fail("malformed pg_config", err);
        od::raw_json_string key = field.key();
        od::value v = field.value();
        std::string_view s;
        if (key.unsafe_is_equal("pg_name")) {
          RETURN_IF_ERROR(GetString(v, "pg_name", &s));
          pg.name = std::string(s);
        } else if (key.unsafe_is_equal("pg_desc")) {
          RETURN_IF_ERROR(GetString(v, "pg_desc", &s));
          pg.description = std::string(s);
        } else if (key.unsafe_is_equal("ranks")) {
          od::array ranks;
          if (v.get_array().get(ranks) != simdjson::SUCCESS) continue;
          for (auto r : ranks) {
            int64_t n = 0;
            if (r.get_int64().get(n) == simdjson::SUCCESS)
              pg.ranks.push_back(static_cast<int32_t>(n));
          }
        }
      }
      w->process_groups.push_back(std::move(pg));
    }
    return absl::OkStatus();
  }

  absl::Status ParseDeviceProperties(od::value& value) {
    od::array devices;
    if (auto err = value.get_array().get(devices); err)
      return Fail("deviceProperties must be an array", err);
    WorkerInfo& w = EnsureSingleWorker().info;
    for (auto element : devices) {
      od::object device;
      if (auto err = element.get_object().get(device); err)
        return Fail("deviceProperties entry must be an object", err);
      DeviceInfo d;
      for (auto field_result : device) {
        od::field field;
        if (auto err = std::move(field_result).get(field); err)
          return Fail("malformed deviceProperties", err);
        od::raw_json_string key = field.key();
        od::value v = field.value();
        int64_t n = 0;
        if (key.unsafe_is_equal("id")) {
          RETURN_IF_ERROR(GetInt(v, "deviceProperties.id", &n));
          d.id = static_cast<int32_t>(n);
        } else if (key.unsafe_is_equal("name")) {
          std::string_view s;
          RETURN_IF_ERROR(GetString(v, "deviceProperties.name", &s));
          d.name = std::string(s);
        } else if (key.unsafe_is_equal("totalGlobalMem")) {
          RETURN_IF_ERROR(GetInt(v, "deviceProperties.totalGlobalMem", &d.total_memory_bytes));
        } else if (key.unsafe_is_equal("computeMajor")) {
          RETURN_IF_ERROR(GetInt(v, "deviceProperties.computeMajor", &n));
          d.compute_major = static_cast<int32_t>(n);
        } else if (key.unsafe_is_equal("computeMinor")) {
          RETURN_IF_ERROR(GetInt(v, "deviceProperties.computeMinor", &n));
          d.compute_minor = static_cast<int32_t>(n);
        } else if (key.unsafe_is_equal("numSms")) {
          RETURN_IF_ERROR(GetInt(v, "deviceProperties.numSms", &n));
          d.sm_count = static_cast<int32_t>(n);
        } else if (key.unsafe_is_equal("maxThreadsPerMultiprocessor")) {
          RETURN_IF_ERROR(GetLimit(v, "maxThreadsPerMultiprocessor", &d.max_threads_per_sm));
        } else if (key.unsafe_is_equal("maxThreadsPerBlock")) {
          RETURN_IF_ERROR(GetLimit(v, "maxThreadsPerBlock", &d.max_threads_per_block));
        } else if (key.unsafe_is_equal("regsPerMultiprocessor")) {
          RETURN_IF_ERROR(GetLimit(v, "regsPerMultiprocessor", &d.registers_per_sm));
        } else if (key.unsafe_is_equal("regsPerBlock")) {
          RETURN_IF_ERROR(GetLimit(v, "regsPerBlock", &d.registers_per_block));
        } else if (key.unsafe_is_equal("sharedMemPerMultiprocessor")) {
          RETURN_IF_ERROR(
              GetInt(v, "deviceProperties.sharedMemPerMultiprocessor", &d.shared_memory_per_sm));
        } else if (key.unsafe_is_equal("sharedMemPerBlockOptin")) {
          RETURN_IF_ERROR(GetInt(v, "deviceProperties.sharedMemPerBlockOptin",
                                 &d.shared_memory_per_block_optin));
        }
      }
      w.devices.push_back(std::move(d));
    }
    return absl::OkStatus();
  }

  // {"format": 1, "workers": [{"pid", "rank", "world_size", "host", "job", "process_name",
  //  "original_pid", "backend"}]}: written by podscope's Chrome-trace exporter.
  absl::Status ParsePodscopeMetadata(od::value& value) {
    od::object meta;
    if (auto err = value.get_object().get(meta); err)
      return Fail("podscope metadata must be an object", err);
    if (!result_.workers.empty()) return Fail("podscope metadata must come before distributedInfo");
    podscope_export_ = true;
    for (auto field_result : meta) {
      od::field field;
      if (auto err = std::move(field_result).get(field); err)
        return Fail("malformed podscope metadata", err);
      if (field.key().unsafe_is_equal("base_time_ns")) {
        // Merged exports write `ts` relative to this base (see chrome_exporter.cc).
        od::value base = field.value();
        RETURN_IF_ERROR(GetInt(base, "podscope.base_time_ns", &base_time_ns_));
        if (base_time_ns_ < 0) return Fail("podscope.base_time_ns must be >= 0");
        continue;
      }
      if (!field.key().unsafe_is_equal("workers")) continue;
      od::value v = field.value();
      od::array workers;
      if (auto err = v.get_array().get(workers); err)
        return Fail("podscope.workers must be an array", err);
      for (auto element : workers) {
        od::object worker;
        if (auto err = element.get_object().get(worker); err)
          return Fail("podscope.workers entry", err);
        if (result_.workers.size() >= options_.max_workers_per_file) {
          return Fail(StrCat("more than ", options_.max_workers_per_file, " workers"));
        }
        WorkerInfo info;
        int64_t pid = kAbsent;
        for (auto wf : worker) {
          od::field f;
          if (auto err = std::move(wf).get(f); err)
            return Fail("malformed podscope.workers entry", err);
          od::raw_json_string key = f.key();
          od::value fv = f.value();
          int64_t n = 0;
          std::string_view s;
          if (key.unsafe_is_equal("pid")) {
            RETURN_IF_ERROR(GetInt(fv, "podscope.workers.pid", &pid));
          } else if (key.unsafe_is_equal("rank")) {
            RETURN_IF_ERROR(GetInt(fv, "podscope.workers.rank", &n));
            info.rank = static_cast<int32_t>(n);
          } else if (key.unsafe_is_equal("world_size")) {
            RETURN_IF_ERROR(GetInt(fv, "podscope.workers.world_size", &n));
            info.world_size = static_cast<int32_t>(n);
          } else if (key.unsafe_is_equal("original_pid")) {
            RETURN_IF_ERROR(GetInt(fv, "podscope.workers.original_pid", &info.pid));
          } else if (key.unsafe_is_equal("host")) {
            RETURN_IF_ERROR(GetString(fv, "podscope.workers.host", &s));
            info.host = std::string(s);
          } else if (key.unsafe_is_equal("job")) {
            RETURN_IF_ERROR(GetString(fv, "podscope.workers.job", &s));
            info.job = std::string(s);
          } else if (key.unsafe_is_equal("process_name")) {
            RETURN_IF_ERROR(GetString(fv, "podscope.workers.process_name", &s));
            info.process_name = std::string(s);
          } else if (key.unsafe_is_equal("backend")) {
            RETURN_IF_ERROR(GetString(fv, "podscope.workers.backend", &s));
            info.backend = std::string(s);
          }
        }
        if (pid == kAbsent) return Fail("podscope.workers entry without pid");
        if (!pid_to_worker_.emplace(pid, result_.workers.size()).second) {
          return Fail(StrCat("podscope.workers declares pid ", pid, " twice"));
        }
        result_.workers.emplace_back().info = std::move(info);
      }
    }
    // Builders point into result_.workers, which no longer grows.
    for (WorkerTrace& w : result_.workers) builders_.emplace_back(&w);
    return absl::OkStatus();
  }

  ImportOptions options_;
  od::parser parser_;
  od::document* doc_ = nullptr;
  std::string_view source_;
  // The piece being parsed: where it is in memory and where it starts in the document.
  const char* doc_base_ = nullptr;
  size_t doc_size_ = 0;
  uint64_t doc_offset_ = 0;
  std::string member_;  // a metadata member's text, padded for simdjson
  absl::Status sink_error_;
  bool saw_events_ = false;
  uint64_t event_index_ = 0;
  bool podscope_export_ = false;
  int64_t base_time_ns_ = 0;  // a merged export's time base, added to every ts
  absl::flat_hash_map<int64_t, size_t> pid_to_worker_;
  // The current event's "Input type" list (a comm op's first tensor's type is picked from it).
  static constexpr int kMaxInputTypes = 8;
  std::string_view input_types_[kMaxInputTypes];
  int input_type_count_ = 0;
  ImportResult result_;
  std::vector<TraceBuilder> builders_;
};

KinetoImporter::KinetoImporter(ImportOptions options) : impl_(std::make_unique<Impl>(options)) {}
KinetoImporter::~KinetoImporter() = default;

absl::StatusOr<ImportResult> KinetoImporter::ImportFile(const std::string& path) {
  return impl_->ImportFile(path);
}

absl::StatusOr<ImportResult> KinetoImporter::ImportJson(std::string_view source_name,
                                                        std::string_view json) {
  return impl_->ImportJson(source_name, json);
}

}  // namespace podscope::common
