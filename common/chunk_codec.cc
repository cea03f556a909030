#include "common/chunk_codec.h"

#include <algorithm>
#include <type_traits>

#include "common/chunk_columns.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "podscope/v1/trace.pb.h"

namespace podscope::common {
namespace {

// Deltas and durations wrap in unsigned arithmetic, so any int64 input round-trips.
int64_t WrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

template <typename Field>
void PutDeltas(const std::vector<int64_t>& values, Field* out) {
  out->Reserve(static_cast<int>(values.size()));
  int64_t previous = 0;
  for (int64_t v : values) {
    out->Add(WrapSub(v, previous));
    previous = v;
  }
}

template <typename Field>
void PutDurations(const std::vector<int64_t>& start, const std::vector<int64_t>& end, Field* out) {
  out->Reserve(static_cast<int>(start.size()));
  for (size_t i = 0; i < start.size(); ++i) out->Add(WrapSub(end[i], start[i]));
}

template <typename T, typename Field>
void PutValues(const std::vector<T>& values, Field* out) {
  out->Reserve(static_cast<int>(values.size()));
  for (T v : values) out->Add(v);
}

template <typename Enum>
void PutBytes(const std::vector<Enum>& values, std::string* out) {
  out->resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) (*out)[i] = static_cast<char>(values[i]);
}

// Makes room for `extra` more values, growing geometrically so that appending many chunks
// stays linear while a single chunk allocates exactly once.
template <typename T>
void Grow(std::vector<T>* out, size_t extra) {
  const size_t needed = out->size() + extra;
  if (needed > out->capacity()) out->reserve(std::max(needed, out->capacity() * 2));
}

// Decoding: every column must have exactly `rows` entries; the checks run before anything
// is appended (see Reader).
class ColumnReader {
 public:
  ColumnReader(std::string_view table, size_t rows, const std::vector<NameId>& name_map)
      : table_(table), rows_(rows), name_map_(name_map) {}

  template <typename Field>
  absl::Status Check(const Field& field, std::string_view column) const {
    if (static_cast<size_t>(field.size()) != rows_) {
      return absl::DataLossError(
          StrCat("chunk ", table_, ".", column, ": ", field.size(), " values, expected ", rows_));
    }
    return absl::OkStatus();
  }
  absl::Status CheckNames(const google::protobuf::RepeatedField<uint32_t>& field,
                          std::string_view column) const {
    RETURN_IF_ERROR(Check(field, column));
    for (uint32_t id : field) {
      if (id >= name_map_.size()) {
        return absl::DataLossError(StrCat("chunk ", table_, ".", column, ": name id ", id,
                                          " outside the string table (", name_map_.size(),
                                          " strings)"));
      }
    }
    return absl::OkStatus();
  }
  absl::Status CheckEnum(const std::string& field, int count, std::string_view column) const {
    RETURN_IF_ERROR(Check(field, column));
    for (char c : field) {
      if (static_cast<unsigned char>(c) >= count) {
        return absl::DataLossError(StrCat("chunk ", table_, ".", column, ": value ",
                                          static_cast<int>(static_cast<unsigned char>(c)),
                                          " out of range"));
      }
    }
    return absl::OkStatus();
  }

  template <typename Field>
  static void AppendDeltas(const Field& field, std::vector<int64_t>* out) {
    Grow(out, field.size());
    int64_t value = 0;
    for (int64_t d : field) {
      value = WrapAdd(value, d);
      out->push_back(value);
    }
  }
  template <typename Field>
  static void AppendEnds(const Field& durations, const std::vector<int64_t>& starts, size_t first,
                         std::vector<int64_t>* out) {
    Grow(out, durations.size());
    for (int i = 0; i < durations.size(); ++i)
      out->push_back(WrapAdd(starts[first + i], durations[i]));
  }
  template <typename T, typename Field>
  static void AppendValues(const Field& field, std::vector<T>* out) {
    Grow(out, field.size());
    out->insert(out->end(), field.begin(), field.end());
  }
  void AppendNames(const google::protobuf::RepeatedField<uint32_t>& field,
                   std::vector<NameId>* out) const {
    Grow(out, field.size());
    for (uint32_t id : field) out->push_back(name_map_[id]);
  }
  template <typename Enum>
  static void AppendEnums(const std::string& field, std::vector<Enum>* out) {
    Grow(out, field.size());
    for (char c : field) out->push_back(static_cast<Enum>(static_cast<unsigned char>(c)));
  }

 private:
  std::string_view table_;
  size_t rows_;
  const std::vector<NameId>& name_map_;
};

void EncodeInfo(const WorkerInfo& info, v1::WorkerInfo* out) {
  out->set_rank(info.rank);
  out->set_world_size(info.world_size);
  out->set_local_rank(info.local_rank);
  out->set_pid(info.pid);
  out->set_host(info.host);
  out->set_job(info.job);
  out->set_backend(info.backend);
  out->set_process_name(info.process_name);
  out->set_source(info.source);
  for (const DeviceInfo& d : info.devices) {
    v1::DeviceInfo* o = out->add_devices();
    o->set_id(d.id);
    o->set_name(d.name);
    o->set_total_memory_bytes(d.total_memory_bytes);
    o->set_compute_major(d.compute_major);
    o->set_compute_minor(d.compute_minor);
    o->set_sm_count(d.sm_count);
    o->set_max_threads_per_sm(d.max_threads_per_sm);
    o->set_max_threads_per_block(d.max_threads_per_block);
    o->set_registers_per_sm(d.registers_per_sm);
    o->set_registers_per_block(d.registers_per_block);
    o->set_shared_memory_per_sm(d.shared_memory_per_sm);
    o->set_shared_memory_per_block_optin(d.shared_memory_per_block_optin);
  }
  for (const ProcessGroupInfo& g : info.process_groups) {
    v1::ProcessGroupInfo* o = out->add_process_groups();
    o->set_name(g.name);
    o->set_description(g.description);
    for (int32_t r : g.ranks) o->add_ranks(r);
  }
  for (const TrackName& t : info.tracks) {
    v1::TrackName* o = out->add_tracks();
    o->set_id(t.id);
    o->set_is_stream(t.is_stream);
    o->set_name(t.name);
  }
}

WorkerInfo DecodeInfo(const v1::WorkerInfo& in) {
  WorkerInfo info;
  info.rank = in.rank();
  info.world_size = in.world_size();
  info.local_rank = in.local_rank();
  info.pid = in.pid();
  info.host = in.host();
  info.job = in.job();
  info.backend = in.backend();
  info.process_name = in.process_name();
  info.source = in.source();
  for (const v1::DeviceInfo& d : in.devices()) {
    DeviceInfo device{.id = d.id(),
                      .name = d.name(),
                      .total_memory_bytes = d.total_memory_bytes(),
                      .compute_major = d.compute_major(),
                      .compute_minor = d.compute_minor(),
                      .sm_count = d.sm_count()};
    device.max_threads_per_sm = d.max_threads_per_sm();
    device.max_threads_per_block = d.max_threads_per_block();
    device.registers_per_sm = d.registers_per_sm();
    device.registers_per_block = d.registers_per_block();
    device.shared_memory_per_sm = d.shared_memory_per_sm();
    device.shared_memory_per_block_optin = d.shared_memory_per_block_optin();
    info.devices.push_back(std::move(device));
  }
  for (const v1::ProcessGroupInfo& g : in.process_groups()) {
    info.process_groups.push_back(
        ProcessGroupInfo{g.name(), g.description(), {g.ranks().begin(), g.ranks().end()}});
  }
  for (const v1::TrackName& t : in.tracks()) {
    info.tracks.push_back(TrackName{t.id(), t.is_stream(), t.name()});
  }
  return info;
}

// One column, whichever coding: written, checked, appended.
template <typename Table, typename Proto, typename T, typename Field>
void EncodeColumn(const chunk::Column<Table, Proto, T, Field>& col, const Table& table,
                  Proto* out) {
  const std::vector<T>& values = table.*col.values;
  Field* field = (out->*col.mut)();
  if constexpr (std::is_same_v<Field, std::string>) {
    PutBytes(values, field);  // kEnum
  } else if constexpr (std::is_same_v<T, int64_t>) {
    switch (col.coding) {
      case chunk::Coding::kDeltas:
        return PutDeltas(values, field);
      case chunk::Coding::kSpan:
        return PutDurations(table.*col.base, values, field);
      default:
        return PutValues(values, field);
    }
  } else {
    PutValues(values, field);
  }
}

template <typename Table, typename Proto, typename T, typename Field>
absl::Status CheckColumn(const chunk::Column<Table, Proto, T, Field>& col, const Proto& in,
                         const ColumnReader& r) {
  const Field& field = (in.*col.get)();
  switch (col.coding) {
    case chunk::Coding::kNames:
      if constexpr (std::is_same_v<T, NameId>) return r.CheckNames(field, col.name);
      break;
    case chunk::Coding::kEnum:
      if constexpr (std::is_same_v<Field, std::string>)
        return r.CheckEnum(field, col.enum_count, col.name);
      break;
    case chunk::Coding::kOptional:
      if (field.size() == 0) return absl::OkStatus();
      break;
    default:
      break;
  }
  return r.Check(field, col.name);
}

template <typename Table, typename Proto, typename T, typename Field>
void AppendColumn(const chunk::Column<Table, Proto, T, Field>& col, const Proto& in, size_t first,
                  size_t rows, const ColumnReader& r, Table* table) {
  const Field& field = (in.*col.get)();
  std::vector<T>& out = table->*col.values;
  if constexpr (std::is_same_v<Field, std::string>) {
    ColumnReader::AppendEnums(field, &out);
  } else {
    switch (col.coding) {
      case chunk::Coding::kNames:
        if constexpr (std::is_same_v<T, NameId>) r.AppendNames(field, &out);
        return;
      case chunk::Coding::kDeltas:
        if constexpr (std::is_same_v<T, int64_t>) ColumnReader::AppendDeltas(field, &out);
        return;
      case chunk::Coding::kSpan:
        if constexpr (std::is_same_v<T, int64_t>)
          ColumnReader::AppendEnds(field, table->*col.base, first, &out);
        return;
      case chunk::Coding::kOptional:
        if (field.size() == 0) {
          out.resize(out.size() + rows, col.absent);
          return;
        }
        break;
      default:
        break;
    }
    ColumnReader::AppendValues(field, &out);
  }
}

// A table's row count in a chunk: its first column's length (the checks hold the rest to it).
template <typename TableCodecT>
size_t RowsIn(const TableCodecT& t, const v1::TraceChunk& chunk) {
  const auto& first = std::get<0>(t.columns);
  return static_cast<size_t>(((chunk.*t.get)().*first.get)().size());
}

}  // namespace

void EncodeChunk(const WorkerTrace& trace, const ChunkHeader& header, v1::TraceChunk* chunk) {
  chunk->Clear();
  chunk->set_format_version(kChunkFormatVersion);
  chunk->set_capture_id(header.capture_id);
  chunk->set_worker_index(header.worker_index);
  chunk->set_sequence(header.sequence);
  EncodeInfo(trace.info, chunk->mutable_worker());
  v1::ClockModel* clock = chunk->mutable_clock();
  clock->set_offset_ns(trace.clock.offset_ns);
  clock->set_drift_ppb(trace.clock.drift_ppb);
  clock->set_reference_ns(trace.clock.reference_ns);
  clock->set_error_bound_ns(trace.clock.error_bound_ns);
  clock->set_source(static_cast<uint32_t>(trace.clock.source));
  chunk->mutable_strings()->Reserve(static_cast<int>(trace.strings.size()));
  for (NameId id = 0; id < trace.strings.size(); ++id) {
    chunk->add_strings(std::string(trace.strings.Get(id)));
  }

  chunk::ForEachTable([&](const auto& t) {
    const auto& table = trace.*t.table;
    if (table.size() == 0 && !t.written_when_empty) return;
    auto* columns = (chunk->*t.mut)();
    chunk::ForEachColumn(t, [&](const auto& col) { EncodeColumn(col, table, columns); });
  });
}

std::string EncodeChunkToBytes(const WorkerTrace& trace, const ChunkHeader& header) {
  v1::TraceChunk chunk;
  EncodeChunk(trace, header, &chunk);
  return chunk.SerializeAsString();
}

absl::Status AppendChunk(const v1::TraceChunk& chunk, WorkerTrace* trace) {
  if (chunk.format_version() == 0 || chunk.format_version() > kChunkFormatVersion) {
    return absl::FailedPreconditionError(StrCat("chunk format version ", chunk.format_version(),
                                                " is not supported (this build reads up to ",
                                                kChunkFormatVersion, ")"));
  }
  // Validate against the chunk's own string table before touching `trace`.
  std::vector<NameId> identity(static_cast<size_t>(chunk.strings_size()));
  absl::Status checked = absl::OkStatus();
  chunk::ForEachTable([&](const auto& t) {
    if (!checked.ok()) return;
    const ColumnReader r(t.name, RowsIn(t, chunk), identity);
    chunk::ForEachColumn(t, [&](const auto& col) {
      if (checked.ok()) checked = CheckColumn(col, (chunk.*t.get)(), r);
    });
  });
  RETURN_IF_ERROR(checked);

  if (chunk.clock().source() > static_cast<uint32_t>(ClockSource::kCollective)) {
    return absl::DataLossError(
        StrCat("chunk clock source ", chunk.clock().source(), " out of range"));
  }
  trace->info = DecodeInfo(chunk.worker());
  const v1::ClockModel& clock = chunk.clock();
  trace->clock = ClockModel{clock.offset_ns(), clock.drift_ppb(), clock.reference_ns(),
                            clock.error_bound_ns(), static_cast<ClockSource>(clock.source())};
  std::vector<NameId> names;
  names.reserve(static_cast<size_t>(chunk.strings_size()));
  for (const std::string& s : chunk.strings()) names.push_back(trace->strings.Intern(s));
  chunk::ForEachTable([&](const auto& t) {
    auto& table = trace->*t.table;
    const size_t first = table.size(), rows = RowsIn(t, chunk);
    const ColumnReader reader(t.name, rows, names);
    chunk::ForEachColumn(t, [&](const auto& col) {
      AppendColumn(col, (chunk.*t.get)(), first, rows, reader, &table);
    });
  });
  return absl::OkStatus();
}

absl::StatusOr<WorkerTrace> DecodeChunkFromBytes(std::string_view bytes) {
  v1::TraceChunk chunk;
  if (!chunk.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(
        StrCat("chunk of ", bytes.size(), " bytes is not a valid TraceChunk protobuf"));
  }
  WorkerTrace trace;
  RETURN_IF_ERROR(AppendChunk(chunk, &trace));
  return trace;
}

}  // namespace podscope::common
