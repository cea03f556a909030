#include "common/chunk_codec.h"

#include <algorithm>
#include <type_traits>

#include "common/str_util.h"
#include "podscope/v1/trace.pb.h"
#include "common/status_macros.h"

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
void PutDurations(const std::vector<int64_t>& start, const std::vector<int64_t>& end,
                  Field* out) {
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
      return absl::DataLossError(StrCat("chunk ", table_, ".", column, ": ", field.size(),
                                              " values, expected ", rows_));
    }
    return absl::OkStatus();
  }
  absl::Status CheckNames(const google::protobuf::RepeatedField<uint32_t>& field,
                          std::string_view column) const {
    RETURN_IF_ERROR(Check(field, column));
    for (uint32_t id : field) {
      if (id >= name_map_.size()) {
        return absl::DataLossError(StrCat("chunk ", table_, ".", column, ": name id ", id,
                                                " outside the string table (",
                                                name_map_.size(), " strings)"));
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
  static void AppendEnds(const Field& durations, const std::vector<int64_t>& starts,
                         size_t first, std::vector<int64_t>* out) {
    Grow(out, durations.size());
    for (int i = 0; i < durations.size(); ++i) out->push_back(WrapAdd(starts[first + i], durations[i]));
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
    DeviceInfo device{.id = d.id(), .name = d.name(), .total_memory_bytes = d.total_memory_bytes(),
                      .compute_major = d.compute_major(), .compute_minor = d.compute_minor(), .sm_count = d.sm_count()};
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

absl::Status CheckKernels(const v1::KernelColumns& c, const std::vector<NameId>& names) {
  ColumnReader r("kernels", c.start_delta_size(), names);
  RETURN_IF_ERROR(r.Check(c.duration(), "duration"));
  RETURN_IF_ERROR(r.Check(c.device(), "device"));
  RETURN_IF_ERROR(r.Check(c.stream(), "stream"));
  RETURN_IF_ERROR(r.CheckNames(c.name(), "name"));
  RETURN_IF_ERROR(r.Check(c.correlation_delta(), "correlation_delta"));
  RETURN_IF_ERROR(r.Check(c.grid_x(), "grid_x"));
  RETURN_IF_ERROR(r.Check(c.grid_y(), "grid_y"));
  RETURN_IF_ERROR(r.Check(c.grid_z(), "grid_z"));
  RETURN_IF_ERROR(r.Check(c.block_x(), "block_x"));
  RETURN_IF_ERROR(r.Check(c.block_y(), "block_y"));
  RETURN_IF_ERROR(r.Check(c.block_z(), "block_z"));
  RETURN_IF_ERROR(r.Check(c.registers_per_thread(), "registers_per_thread"));
  RETURN_IF_ERROR(r.Check(c.shared_memory_bytes(), "shared_memory_bytes"));
  return r.CheckEnum(c.kernel_class(), kKernelClassCount, "kernel_class");
}

absl::Status CheckMemcpys(const v1::MemcpyColumns& c, const std::vector<NameId>& names) {
  ColumnReader r("memcpys", c.start_delta_size(), names);
  RETURN_IF_ERROR(r.Check(c.duration(), "duration"));
  RETURN_IF_ERROR(r.Check(c.device(), "device"));
  RETURN_IF_ERROR(r.Check(c.stream(), "stream"));
  RETURN_IF_ERROR(r.CheckNames(c.name(), "name"));
  RETURN_IF_ERROR(r.Check(c.bytes(), "bytes"));
  RETURN_IF_ERROR(r.Check(c.correlation_delta(), "correlation_delta"));
  return r.CheckEnum(c.kind(), kMemcpyKindCount, "kind");
}

absl::Status CheckRuntimeCalls(const v1::RuntimeCallColumns& c,
                               const std::vector<NameId>& names) {
  ColumnReader r("runtime_calls", c.start_delta_size(), names);
  RETURN_IF_ERROR(r.Check(c.duration(), "duration"));
  RETURN_IF_ERROR(r.Check(c.thread(), "thread"));
  RETURN_IF_ERROR(r.CheckNames(c.name(), "name"));
  RETURN_IF_ERROR(r.Check(c.correlation_delta(), "correlation_delta"));
  RETURN_IF_ERROR(r.Check(c.external_id_delta(), "external_id_delta"));
  return r.CheckEnum(c.api_kind(), kApiKindCount, "api_kind");
}

absl::Status CheckHostSpans(const v1::HostSpanColumns& c, const std::vector<NameId>& names) {
  ColumnReader r("host_spans", c.start_delta_size(), names);
  RETURN_IF_ERROR(r.Check(c.duration(), "duration"));
  RETURN_IF_ERROR(r.Check(c.thread(), "thread"));
  RETURN_IF_ERROR(r.CheckNames(c.name(), "name"));
  RETURN_IF_ERROR(r.CheckEnum(c.category(), kHostSpanCategoryCount, "category"));
  RETURN_IF_ERROR(r.Check(c.step(), "step"));
  return r.Check(c.external_id_delta(), "external_id_delta");
}

absl::Status CheckCollectives(const v1::CollectiveColumns& c, const std::vector<NameId>& names) {
  ColumnReader r("collectives", c.enqueue_delta_size(), names);
  RETURN_IF_ERROR(r.CheckNames(c.communicator(), "communicator"));
  RETURN_IF_ERROR(r.Check(c.rank(), "rank"));
  RETURN_IF_ERROR(r.Check(c.nranks(), "nranks"));
  RETURN_IF_ERROR(r.CheckEnum(c.op(), kCollectiveOpCount, "op"));
  RETURN_IF_ERROR(r.Check(c.sequence(), "sequence"));
  RETURN_IF_ERROR(r.Check(c.count(), "count"));
  RETURN_IF_ERROR(r.CheckNames(c.dtype(), "dtype"));
  RETURN_IF_ERROR(r.Check(c.bytes(), "bytes"));
  RETURN_IF_ERROR(r.CheckNames(c.algorithm(), "algorithm"));
  RETURN_IF_ERROR(r.CheckNames(c.protocol(), "protocol"));
  RETURN_IF_ERROR(r.Check(c.channels(), "channels"));
  RETURN_IF_ERROR(r.Check(c.kernel_start_offset(), "kernel_start_offset"));
  RETURN_IF_ERROR(r.Check(c.kernel_duration(), "kernel_duration"));
  return r.Check(c.correlation_delta(), "correlation_delta");
}

absl::Status CheckSteps(const v1::StepColumns& c, const std::vector<NameId>& names) {
  ColumnReader r("steps", c.start_delta_size(), names);
  RETURN_IF_ERROR(r.Check(c.number(), "number"));
  RETURN_IF_ERROR(r.Check(c.duration(), "duration"));
  return r.Check(c.thread(), "thread");
}

absl::Status CheckHostSamples(const v1::HostSampleColumns& c, const std::vector<NameId>& names) {
  ColumnReader r("host_samples", c.time_delta_size(), names);
  RETURN_IF_ERROR(r.Check(c.cpu_percent(), "cpu_percent"));
  if (c.process_cpu_percent_size() != 0) RETURN_IF_ERROR(r.Check(c.process_cpu_percent(), "process_cpu_percent"));
  RETURN_IF_ERROR(r.Check(c.memory_used_bytes(), "memory_used_bytes"));
  RETURN_IF_ERROR(r.Check(c.net_rx_bytes(), "net_rx_bytes"));
  RETURN_IF_ERROR(r.Check(c.net_tx_bytes(), "net_tx_bytes"));
  RETURN_IF_ERROR(r.Check(c.gpu_sm_clock_mhz(), "gpu_sm_clock_mhz"));
  RETURN_IF_ERROR(r.Check(c.gpu_power_mw(), "gpu_power_mw"));
  RETURN_IF_ERROR(r.Check(c.gpu_temperature_c(), "gpu_temperature_c"));
  return r.Check(c.gpu_throttle_reasons(), "gpu_throttle_reasons");
}

absl::Status CheckMemoryEvents(const v1::MemoryEventColumns& c, const std::vector<NameId>& names) {
  ColumnReader r("memory_events", c.time_delta_size(), names);
  RETURN_IF_ERROR(r.Check(c.device(), "device"));
  RETURN_IF_ERROR(r.Check(c.bytes(), "bytes"));
  RETURN_IF_ERROR(r.Check(c.total_allocated(), "total_allocated"));
  RETURN_IF_ERROR(r.Check(c.total_reserved(), "total_reserved"));
  return r.Check(c.thread(), "thread");
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

  const KernelTable& k = trace.kernels;
  v1::KernelColumns* kc = chunk->mutable_kernels();
  PutDeltas(k.start, kc->mutable_start_delta());
  PutDurations(k.start, k.end, kc->mutable_duration());
  PutValues(k.device, kc->mutable_device());
  PutValues(k.stream, kc->mutable_stream());
  PutValues(k.name, kc->mutable_name());
  PutDeltas(k.correlation, kc->mutable_correlation_delta());
  PutValues(k.grid_x, kc->mutable_grid_x());
  PutValues(k.grid_y, kc->mutable_grid_y());
  PutValues(k.grid_z, kc->mutable_grid_z());
  PutValues(k.block_x, kc->mutable_block_x());
  PutValues(k.block_y, kc->mutable_block_y());
  PutValues(k.block_z, kc->mutable_block_z());
  PutValues(k.registers_per_thread, kc->mutable_registers_per_thread());
  PutValues(k.shared_memory_bytes, kc->mutable_shared_memory_bytes());
  PutBytes(k.kernel_class, kc->mutable_kernel_class());

  const MemcpyTable& m = trace.memcpys;
  v1::MemcpyColumns* mc = chunk->mutable_memcpys();
  PutDeltas(m.start, mc->mutable_start_delta());
  PutDurations(m.start, m.end, mc->mutable_duration());
  PutValues(m.device, mc->mutable_device());
  PutValues(m.stream, mc->mutable_stream());
  PutValues(m.name, mc->mutable_name());
  PutValues(m.bytes, mc->mutable_bytes());
  PutDeltas(m.correlation, mc->mutable_correlation_delta());
  PutBytes(m.kind, mc->mutable_kind());

  const RuntimeCallTable& rt = trace.runtime_calls;
  v1::RuntimeCallColumns* rc = chunk->mutable_runtime_calls();
  PutDeltas(rt.start, rc->mutable_start_delta());
  PutDurations(rt.start, rt.end, rc->mutable_duration());
  PutValues(rt.thread, rc->mutable_thread());
  PutValues(rt.name, rc->mutable_name());
  PutDeltas(rt.correlation, rc->mutable_correlation_delta());
  PutDeltas(rt.external_id, rc->mutable_external_id_delta());
  PutBytes(rt.api_kind, rc->mutable_api_kind());

  const HostSpanTable& h = trace.host_spans;
  v1::HostSpanColumns* hc = chunk->mutable_host_spans();
  PutDeltas(h.start, hc->mutable_start_delta());
  PutDurations(h.start, h.end, hc->mutable_duration());
  PutValues(h.thread, hc->mutable_thread());
  PutValues(h.name, hc->mutable_name());
  PutBytes(h.category, hc->mutable_category());
  PutValues(h.step, hc->mutable_step());
  PutDeltas(h.external_id, hc->mutable_external_id_delta());

  const CollectiveTable& c = trace.collectives;
  v1::CollectiveColumns* cc = chunk->mutable_collectives();
  PutValues(c.communicator, cc->mutable_communicator());
  PutValues(c.rank, cc->mutable_rank());
  PutValues(c.nranks, cc->mutable_nranks());
  PutBytes(c.op, cc->mutable_op());
  PutValues(c.sequence, cc->mutable_sequence());
  PutValues(c.count, cc->mutable_count());
  PutValues(c.dtype, cc->mutable_dtype());
  PutValues(c.bytes, cc->mutable_bytes());
  PutValues(c.algorithm, cc->mutable_algorithm());
  PutValues(c.protocol, cc->mutable_protocol());
  PutValues(c.channels, cc->mutable_channels());
  PutDeltas(c.enqueue, cc->mutable_enqueue_delta());
  PutDurations(c.enqueue, c.kernel_start, cc->mutable_kernel_start_offset());
  PutDurations(c.kernel_start, c.kernel_end, cc->mutable_kernel_duration());
  PutDeltas(c.correlation, cc->mutable_correlation_delta());

  const StepTable& s = trace.steps;
  v1::StepColumns* sc = chunk->mutable_steps();
  PutValues(s.number, sc->mutable_number());
  PutDeltas(s.start, sc->mutable_start_delta());
  PutDurations(s.start, s.end, sc->mutable_duration());
  PutValues(s.thread, sc->mutable_thread());

  const HostSampleTable& hs = trace.host_samples;
  v1::HostSampleColumns* hsc = chunk->mutable_host_samples();
  PutDeltas(hs.time, hsc->mutable_time_delta());
  PutValues(hs.cpu_percent, hsc->mutable_cpu_percent());
  PutValues(hs.process_cpu_percent, hsc->mutable_process_cpu_percent());
  PutValues(hs.memory_used_bytes, hsc->mutable_memory_used_bytes());
  PutValues(hs.net_rx_bytes, hsc->mutable_net_rx_bytes());
  PutValues(hs.net_tx_bytes, hsc->mutable_net_tx_bytes());
  PutValues(hs.gpu_sm_clock_mhz, hsc->mutable_gpu_sm_clock_mhz());
  PutValues(hs.gpu_power_mw, hsc->mutable_gpu_power_mw());
  PutValues(hs.gpu_temperature_c, hsc->mutable_gpu_temperature_c());
  PutValues(hs.gpu_throttle_reasons, hsc->mutable_gpu_throttle_reasons());

  const MemoryEventTable& me = trace.memory_events;
  if (me.size() > 0) {
    v1::MemoryEventColumns* mc = chunk->mutable_memory_events();
    PutDeltas(me.time, mc->mutable_time_delta());
    PutValues(me.device, mc->mutable_device());
    PutValues(me.bytes, mc->mutable_bytes());
    PutValues(me.total_allocated, mc->mutable_total_allocated());
    PutValues(me.total_reserved, mc->mutable_total_reserved());
    PutValues(me.thread, mc->mutable_thread());
  }
}

std::string EncodeChunkToBytes(const WorkerTrace& trace, const ChunkHeader& header) {
  v1::TraceChunk chunk;
  EncodeChunk(trace, header, &chunk);
  return chunk.SerializeAsString();
}

absl::Status AppendChunk(const v1::TraceChunk& chunk, WorkerTrace* trace) {
  if (chunk.format_version() == 0 || chunk.format_version() > kChunkFormatVersion) {
    return absl::FailedPreconditionError(
        StrCat("chunk format version ", chunk.format_version(),
                     " is not supported (this build reads up to ", kChunkFormatVersion, ")"));
  }
  // Validate against the chunk's own string table before touching `trace`.
  std::vector<NameId> identity(static_cast<size_t>(chunk.strings_size()));
  RETURN_IF_ERROR(CheckKernels(chunk.kernels(), identity));
  RETURN_IF_ERROR(CheckMemcpys(chunk.memcpys(), identity));
  RETURN_IF_ERROR(CheckRuntimeCalls(chunk.runtime_calls(), identity));
  RETURN_IF_ERROR(CheckHostSpans(chunk.host_spans(), identity));
  RETURN_IF_ERROR(CheckCollectives(chunk.collectives(), identity));
  RETURN_IF_ERROR(CheckSteps(chunk.steps(), identity));
  RETURN_IF_ERROR(CheckHostSamples(chunk.host_samples(), identity));
  RETURN_IF_ERROR(CheckMemoryEvents(chunk.memory_events(), identity));

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
  using R = ColumnReader;
  const R reader("", 0, names);

  const v1::KernelColumns& kc = chunk.kernels();
  KernelTable& k = trace->kernels;
  size_t first = k.start.size();
  R::AppendDeltas(kc.start_delta(), &k.start);
  R::AppendEnds(kc.duration(), k.start, first, &k.end);
  R::AppendValues(kc.device(), &k.device);
  R::AppendValues(kc.stream(), &k.stream);
  reader.AppendNames(kc.name(), &k.name);
  R::AppendDeltas(kc.correlation_delta(), &k.correlation);
  R::AppendValues(kc.grid_x(), &k.grid_x);
  R::AppendValues(kc.grid_y(), &k.grid_y);
  R::AppendValues(kc.grid_z(), &k.grid_z);
  R::AppendValues(kc.block_x(), &k.block_x);
  R::AppendValues(kc.block_y(), &k.block_y);
  R::AppendValues(kc.block_z(), &k.block_z);
  R::AppendValues(kc.registers_per_thread(), &k.registers_per_thread);
  R::AppendValues(kc.shared_memory_bytes(), &k.shared_memory_bytes);
  R::AppendEnums(kc.kernel_class(), &k.kernel_class);

  const v1::MemcpyColumns& mc = chunk.memcpys();
  MemcpyTable& m = trace->memcpys;
  first = m.start.size();
  R::AppendDeltas(mc.start_delta(), &m.start);
  R::AppendEnds(mc.duration(), m.start, first, &m.end);
  R::AppendValues(mc.device(), &m.device);
  R::AppendValues(mc.stream(), &m.stream);
  reader.AppendNames(mc.name(), &m.name);
  R::AppendValues(mc.bytes(), &m.bytes);
  R::AppendDeltas(mc.correlation_delta(), &m.correlation);
  R::AppendEnums(mc.kind(), &m.kind);

  const v1::RuntimeCallColumns& rc = chunk.runtime_calls();
  RuntimeCallTable& rt = trace->runtime_calls;
  first = rt.start.size();
  R::AppendDeltas(rc.start_delta(), &rt.start);
  R::AppendEnds(rc.duration(), rt.start, first, &rt.end);
  R::AppendValues(rc.thread(), &rt.thread);
  reader.AppendNames(rc.name(), &rt.name);
  R::AppendDeltas(rc.correlation_delta(), &rt.correlation);
  R::AppendDeltas(rc.external_id_delta(), &rt.external_id);
  R::AppendEnums(rc.api_kind(), &rt.api_kind);

  const v1::HostSpanColumns& hc = chunk.host_spans();
  HostSpanTable& h = trace->host_spans;
  first = h.start.size();
  R::AppendDeltas(hc.start_delta(), &h.start);
  R::AppendEnds(hc.duration(), h.start, first, &h.end);
  R::AppendValues(hc.thread(), &h.thread);
  reader.AppendNames(hc.name(), &h.name);
  R::AppendEnums(hc.category(), &h.category);
  R::AppendValues(hc.step(), &h.step);
  R::AppendDeltas(hc.external_id_delta(), &h.external_id);

  const v1::CollectiveColumns& cc = chunk.collectives();
  CollectiveTable& c = trace->collectives;
  first = c.enqueue.size();
  reader.AppendNames(cc.communicator(), &c.communicator);
  R::AppendValues(cc.rank(), &c.rank);
  R::AppendValues(cc.nranks(), &c.nranks);
  R::AppendEnums(cc.op(), &c.op);
  R::AppendValues(cc.sequence(), &c.sequence);
  R::AppendValues(cc.count(), &c.count);
  reader.AppendNames(cc.dtype(), &c.dtype);
  R::AppendValues(cc.bytes(), &c.bytes);
  reader.AppendNames(cc.algorithm(), &c.algorithm);
  reader.AppendNames(cc.protocol(), &c.protocol);
  R::AppendValues(cc.channels(), &c.channels);
  R::AppendDeltas(cc.enqueue_delta(), &c.enqueue);
  R::AppendEnds(cc.kernel_start_offset(), c.enqueue, first, &c.kernel_start);
  R::AppendEnds(cc.kernel_duration(), c.kernel_start, first, &c.kernel_end);
  R::AppendDeltas(cc.correlation_delta(), &c.correlation);

  const v1::StepColumns& sc = chunk.steps();
  StepTable& s = trace->steps;
  first = s.start.size();
  R::AppendValues(sc.number(), &s.number);
  R::AppendDeltas(sc.start_delta(), &s.start);
  R::AppendEnds(sc.duration(), s.start, first, &s.end);
  R::AppendValues(sc.thread(), &s.thread);

  const v1::HostSampleColumns& hsc = chunk.host_samples();
  HostSampleTable& hs = trace->host_samples;
  R::AppendDeltas(hsc.time_delta(), &hs.time);
  R::AppendValues(hsc.cpu_percent(), &hs.cpu_percent);
  if (hsc.process_cpu_percent_size() == 0) {
    hs.process_cpu_percent.resize(hs.process_cpu_percent.size() + hsc.cpu_percent_size(), -1.0f);
  } else {
    R::AppendValues(hsc.process_cpu_percent(), &hs.process_cpu_percent);
  }
  R::AppendValues(hsc.memory_used_bytes(), &hs.memory_used_bytes);
  R::AppendValues(hsc.net_rx_bytes(), &hs.net_rx_bytes);
  R::AppendValues(hsc.net_tx_bytes(), &hs.net_tx_bytes);
  R::AppendValues(hsc.gpu_sm_clock_mhz(), &hs.gpu_sm_clock_mhz);
  R::AppendValues(hsc.gpu_power_mw(), &hs.gpu_power_mw);
  R::AppendValues(hsc.gpu_temperature_c(), &hs.gpu_temperature_c);
  R::AppendValues(hsc.gpu_throttle_reasons(), &hs.gpu_throttle_reasons);

  const v1::MemoryEventColumns& mec = chunk.memory_events();
  MemoryEventTable& me = trace->memory_events;
  R::AppendDeltas(mec.time_delta(), &me.time);
  R::AppendValues(mec.device(), &me.device);
  R::AppendValues(mec.bytes(), &me.bytes);
  R::AppendValues(mec.total_allocated(), &me.total_allocated);
  R::AppendValues(mec.total_reserved(), &me.total_reserved);
  R::AppendValues(mec.thread(), &me.thread);
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
