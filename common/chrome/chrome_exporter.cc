#include "common/chrome/chrome_exporter.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "common/file_io.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "common/worker_source.h"

namespace podscope::common {
namespace {

constexpr size_t kFlushBytes = 1 << 20;

// Writes the events of one worker. Owned by WriteChromeTrace; single-threaded.
class WorkerWriter {
 public:
  // Timestamps are written as (aligned time - base_ns): see WriteChromeTrace.
  WorkerWriter(const WorkerTrace& w, int64_t pid, const ExportOptions& options, JsonWriter* out,
               uint64_t* events, uint64_t* next_flow_id, TimeNs base_ns)
      : w_(w),
        pid_(pid),
        options_(options),
        out_(*out),
        events_(*events),
        next_flow_id_(*next_flow_id),
        base_ns_(base_ns) {}

  // Calls `flush` between events so the buffer stays bounded.
  template <typename Flush>
  absl::Status Write(Flush&& flush) {
    WriteMetadata();
    RETURN_IF_ERROR(flush());
    absl::flat_hash_map<int64_t, size_t> launch_of;  // correlation -> runtime call row
    if (options_.flows) {
      for (size_t i = 0; i < w_.runtime_calls.size(); ++i) {
        if (w_.runtime_calls.correlation[i] >= 0)
          launch_of.emplace(w_.runtime_calls.correlation[i], i);
      }
    }
    absl::flat_hash_map<int64_t, size_t> collective_of;  // kernel correlation -> collective row
    for (size_t i = 0; i < w_.collectives.size(); ++i) {
      if (w_.collectives.correlation[i] >= 0)
        collective_of.emplace(w_.collectives.correlation[i], i);
    }
    const KernelTable& k = w_.kernels;
    for (size_t i = 0; i < k.size(); ++i) {
      WriteKernel(i, collective_of);
      MaybeFlow(k.correlation[i], k.start[i], DeviceTrack(k.device[i], k.stream[i]), launch_of);
      if (out_.size() > kFlushBytes) RETURN_IF_ERROR(flush());
    }
    const MemcpyTable& m = w_.memcpys;
    for (size_t i = 0; i < m.size(); ++i) {
      WriteMemcpy(i);
      MaybeFlow(m.correlation[i], m.start[i], DeviceTrack(m.device[i], m.stream[i]), launch_of);
      if (out_.size() > kFlushBytes) RETURN_IF_ERROR(flush());
    }
    const RuntimeCallTable& r = w_.runtime_calls;
    for (size_t i = 0; i < r.size(); ++i) {
      BeginEvent(r.api_kind[i] == ApiKind::kDriver ? "cuda_driver" : "cuda_runtime",
                 w_.strings.Get(r.name[i]), r.thread[i], r.start[i], r.end[i]);
      out_.Key("args").BeginObject().Key("correlation").Int(r.correlation[i]);
      if (r.external_id[i] >= 0) out_.Key("External id").Int(r.external_id[i]);
      out_.EndObject().EndObject();
      if (out_.size() > kFlushBytes) RETURN_IF_ERROR(flush());
    }
    const HostSpanTable& h = w_.host_spans;
    for (size_t i = 0; i < h.size(); ++i) {
      const bool on_gpu = h.category[i] == HostSpanCategory::kGpuAnnotation;
      BeginEventOn(KinetoCategory(h.category[i]), w_.strings.Get(h.name[i]),
                   on_gpu ? DeviceTrack(0, h.thread[i]) : std::make_pair(pid_, h.thread[i]),
                   h.start[i], h.end[i]);
      out_.Key("args").BeginObject();
      if (on_gpu) out_.Key("stream").Int(h.thread[i]);
      if (h.external_id[i] >= 0) out_.Key("External id").Int(h.external_id[i]);
      out_.EndObject().EndObject();
      if (out_.size() > kFlushBytes) RETURN_IF_ERROR(flush());
    }
    // The allocator's events as Kineto writes them: thread-scoped `[memory]` instants.
    const MemoryEventTable& mem = w_.memory_events;
    for (size_t i = 0; i < mem.size(); ++i) {
      BeginEventObject();
      out_.Key("ph").String("i").Key("s").String("t").Key("cat").String("cpu_instant_event");
      out_.Key("name").String("[memory]").Key("pid").Int(pid_).Key("tid").Int(mem.thread[i]);
      out_.Key("ts").MicrosFromNanos(w_.clock.ToAligned(mem.time[i]) - base_ns_);
      out_.Key("args").BeginObject();
      out_.Key("Device Type").Int(mem.device[i] < 0 ? 0 : 1).Key("Device Id").Int(mem.device[i]);
      out_.Key("Bytes").Int(mem.bytes[i]);
      if (mem.total_allocated[i] >= 0) out_.Key("Total Allocated").Int(mem.total_allocated[i]);
      if (mem.total_reserved[i] >= 0) out_.Key("Total Reserved").Int(mem.total_reserved[i]);
      out_.EndObject().EndObject();
      if (out_.size() > kFlushBytes) RETURN_IF_ERROR(flush());
    }
    return absl::OkStatus();
  }

 private:
  // Where a device event goes: a thread of the worker's process (merged), or Kineto's
  // pid = device, tid = stream.
  std::pair<int64_t, int64_t> DeviceTrack(int32_t device, int64_t stream) const {
    if (options_.layout == ExportLayout::kKineto) return {device, stream};
    return {pid_, StreamTrackId(device, stream)};
  }

  // An event: one element of the "traceEvents" array.
  void BeginEventObject() {
    out_.BeginObject();
    ++events_;
  }

  // A complete event ("ph":"X"), up to its args.
  void BeginEvent(std::string_view cat, std::string_view name, int64_t tid, TimeNs start,
                  TimeNs end) {
    BeginEventOn(cat, name, {pid_, tid}, start, end);
  }
  void BeginEventOn(std::string_view cat, std::string_view name, std::pair<int64_t, int64_t> track,
                    TimeNs start, TimeNs end) {
    BeginEventObject();
    const TimeNs a = w_.clock.ToAligned(start);
    const TimeNs b = w_.clock.ToAligned(end);
    out_.Key("ph").String("X").Key("cat").String(cat).Key("name").String(name);
    out_.Key("pid").Int(track.first).Key("tid").Int(track.second);
    out_.Key("ts").MicrosFromNanos(a - base_ns_).Key("dur").MicrosFromNanos(b - a);
  }

  void Metadata(std::string_view name, int64_t tid, std::string_view key, std::string_view text,
                int64_t number, bool is_text) {
    MetadataOn(pid_, name, tid, key, text, number, is_text);
  }
  void MetadataOn(int64_t pid, std::string_view name, int64_t tid, std::string_view key,
                  std::string_view text, int64_t number, bool is_text) {
    BeginEventObject();
    out_.Key("ph").String("M").Key("name").String(name).Key("pid").Int(pid).Key("tid").Int(tid);
    out_.Key("args").BeginObject().Key(key);
    if (is_text) {
      out_.String(text);
    } else {
      out_.Int(number);
    }
    out_.EndObject().EndObject();
  }

  void WriteMetadata() {
    Metadata(
        "process_name", 0, "name",
        options_.layout == ExportLayout::kKineto ? w_.info.process_name : w_.info.DisplayName(), 0,
        true);
    Metadata("process_sort_index", 0, "sort_index", {}, w_.info.rank, false);
    std::set<int64_t> threads;
    for (int64_t t : w_.runtime_calls.thread) threads.insert(t);
    for (size_t i = 0; i < w_.host_spans.size(); ++i) {
      if (w_.host_spans.category[i] != HostSpanCategory::kGpuAnnotation)
        threads.insert(w_.host_spans.thread[i]);
    }
    int64_t sort = 0;
    for (int64_t t : threads) {
      std::string name = StrCat("thread ", t);
      for (const TrackName& track : w_.info.tracks) {
        if (!track.is_stream && track.id == t) name = track.name;
      }
      Metadata("thread_name", t, "name", name, 0, true);
      Metadata("thread_sort_index", t, "sort_index", {}, sort++, false);
    }
    std::set<std::pair<int32_t, int64_t>> streams;
    for (size_t i = 0; i < w_.kernels.size(); ++i)
      streams.emplace(w_.kernels.device[i], w_.kernels.stream[i]);
    for (size_t i = 0; i < w_.memcpys.size(); ++i)
      streams.emplace(w_.memcpys.device[i], w_.memcpys.stream[i]);
    for (size_t i = 0; i < w_.host_spans.size(); ++i) {
      if (w_.host_spans.category[i] == HostSpanCategory::kGpuAnnotation)
        streams.emplace(0, w_.host_spans.thread[i]);
    }
    std::set<int32_t> devices;
    for (const auto& [device, stream] : streams) devices.insert(device);
    if (options_.layout == ExportLayout::kKineto) {
      for (int32_t device : devices) {
        MetadataOn(device, "process_name", 0, "name", w_.info.process_name, 0, true);
        MetadataOn(device, "process_labels", 0, "labels", StrCat("GPU ", device), 0, true);
        MetadataOn(device, "process_sort_index", 0, "sort_index", {}, 0x1000000 + device, false);
      }
    }
    for (const auto& [device, stream] : streams) {
      const auto [pid, tid] = DeviceTrack(device, stream);
      MetadataOn(pid, "thread_name", tid, "name", StrCat("GPU ", device, " stream ", stream), 0,
                 true);
      MetadataOn(pid, "thread_sort_index", tid, "sort_index", {}, sort++, false);
    }
  }

  void WriteKernel(size_t i, const absl::flat_hash_map<int64_t, size_t>& collective_of) {
    const KernelTable& k = w_.kernels;
    const std::string_view cat = k.kernel_class[i] == KernelClass::kSync ? "cuda_sync" : "kernel";
    BeginEventOn(cat, w_.strings.Get(k.name[i]), DeviceTrack(k.device[i], k.stream[i]), k.start[i],
                 k.end[i]);
    out_.Key("args").BeginObject().Key("device").Int(k.device[i]).Key("stream").Int(k.stream[i]);
    out_.Key("correlation").Int(k.correlation[i]);
    if (k.kernel_class[i] != KernelClass::kSync) {
      out_.Key("grid").BeginArray().Uint(k.grid_x[i]).Uint(k.grid_y[i]).Uint(k.grid_z[i]);
      out_.EndArray();
      out_.Key("block").BeginArray().Uint(k.block_x[i]).Uint(k.block_y[i]).Uint(k.block_z[i]);
      out_.EndArray();
      out_.Key("registers per thread").Int(k.registers_per_thread[i]);
      out_.Key("shared memory").Int(k.shared_memory_bytes[i]);
    }
    auto c = k.correlation[i] >= 0 ? collective_of.find(k.correlation[i]) : collective_of.end();
    if (c != collective_of.end()) WriteCollectiveArgs(c->second);
    out_.EndObject().EndObject();
  }

  // The collective's metadata under the keys PyTorch uses, plus podscope's own, so that
  // re-importing the export rebuilds the same collective rows.
  void WriteCollectiveArgs(size_t i) {
    const CollectiveTable& c = w_.collectives;
    out_.Key("Collective name").String(CollectiveOpName(c.op[i]));
    out_.Key("In msg nelems").Int(c.count[i]).Key("Out msg nelems").Int(c.count[i]);
    out_.Key("dtype").String(w_.strings.Get(c.dtype[i])).Key("Group size").Int(c.nranks[i]);
    if (c.sequence[i] != kUnknownSequence) out_.Key("Seq").Int(c.sequence[i]);
    out_.Key("communicator").String(w_.strings.Get(c.communicator[i]));
    out_.Key("algorithm").String(w_.strings.Get(c.algorithm[i]));
    out_.Key("protocol").String(w_.strings.Get(c.protocol[i]));
    out_.Key("channels").Int(c.channels[i]);
  }

  void WriteMemcpy(size_t i) {
    const MemcpyTable& m = w_.memcpys;
    const bool memset = m.kind[i] == MemcpyKind::kMemset;
    BeginEventOn(memset ? "gpu_memset" : "gpu_memcpy", w_.strings.Get(m.name[i]),
                 DeviceTrack(m.device[i], m.stream[i]), m.start[i], m.end[i]);
    out_.Key("args").BeginObject().Key("device").Int(m.device[i]).Key("stream").Int(m.stream[i]);
    out_.Key("correlation").Int(m.correlation[i]).Key("bytes").Int(m.bytes[i]);
    out_.EndObject().EndObject();
  }

  void MaybeFlow(int64_t correlation, TimeNs device_start, std::pair<int64_t, int64_t> device_track,
                 const absl::flat_hash_map<int64_t, size_t>& launch_of) {
    if (!options_.flows || correlation < 0) return;
    auto it = launch_of.find(correlation);
    if (it == launch_of.end()) return;
    const uint64_t id = ++next_flow_id_;
    const RuntimeCallTable& r = w_.runtime_calls;
    BeginEventObject();
    out_.Key("ph").String("s").Key("cat").String("ac2g").Key("name").String("launch");
    out_.Key("id").Uint(id).Key("pid").Int(pid_).Key("tid").Int(r.thread[it->second]);
    out_.Key("ts").MicrosFromNanos(w_.clock.ToAligned(r.start[it->second]) - base_ns_);
    out_.EndObject();
    BeginEventObject();
    out_.Key("ph").String("f").Key("bp").String("e").Key("cat").String("ac2g");
    out_.Key("name").String("launch").Key("id").Uint(id);
    out_.Key("pid").Int(device_track.first).Key("tid").Int(device_track.second);
    out_.Key("ts").MicrosFromNanos(w_.clock.ToAligned(device_start) - base_ns_).EndObject();
  }

  const WorkerTrace& w_;
  int64_t pid_;
  const ExportOptions& options_;
  JsonWriter& out_;
  uint64_t& events_;
  uint64_t& next_flow_id_;
  const TimeNs base_ns_;
};

}  // namespace

std::string_view KinetoCategory(HostSpanCategory c) {
  switch (c) {
    case HostSpanCategory::kOp:
      return "cpu_op";
    case HostSpanCategory::kPython:
      return "python_function";
    case HostSpanCategory::kGpuAnnotation:
      return "gpu_user_annotation";
    case HostSpanCategory::kAnnotation:
    case HostSpanCategory::kInput:      // re-derived from the name on import
    case HostSpanCategory::kOptimizer:  // likewise
      return "user_annotation";
  }
  return "user_annotation";
}

int64_t StreamTrackId(int32_t device, int64_t stream) {
  return kStreamTrackBase + (static_cast<int64_t>(device & 0xff) << 20) + (stream & 0xfffff);
}

absl::StatusOr<ExportStats> WriteChromeTrace(
    WorkerSource& workers, const ExportOptions& options,
    const std::function<absl::Status(std::string_view)>& sink,
    const std::function<void(size_t)>& progress) {
  // A first pass for what comes before the events: every worker's description and the merged
  // layout's time base, the window's start or else the earliest aligned instant of any worker,
  // down to a whole millisecond (the Kineto layout keeps absolute times, as the PyTorch profiler
  // writes them).
  struct Described {
    WorkerInfo info;
    ClockModel clock;
  };
  std::vector<Described> described;
  TimeNs first = INT64_MAX;
  RETURN_IF_ERROR(workers.ForEachWorker([&](const WorkerTrace& w) {
    described.push_back({w.info, w.clock});
    described.back().info.tracks.clear();
    if (options.layout == ExportLayout::kMerged) first = std::min(first, FirstAlignedInstant(w));
    return absl::OkStatus();
  }));
  TimeNs base_ns = 0;
  if (options.layout == ExportLayout::kMerged && options.window_start_ns > 0) {
    // A millisecond of room before the window for what lies within the clock bound before it.
    const TimeNs room = options.window_start_ns - 1'000'000;
    base_ns = room - room % 1'000'000;
  } else if (first != INT64_MAX && first > 0) {
    base_ns = first - first % 1'000'000;
  }
  ExportStats stats;
  JsonWriter out;
  auto flush = [&]() -> absl::Status {
    stats.bytes += out.size();
    absl::Status status = sink(out.buffer());
    out.ClearBuffer();
    return status;
  };
  if (options.layout == ExportLayout::kKineto) {
    if (described.size() != 1) {
      return absl::InvalidArgumentError(
          StrCat("the Kineto layout holds exactly one worker, not ", described.size()));
    }
    const WorkerInfo& info = described[0].info;
    out.BeginObject().Key("schemaVersion").Int(1);
    out.Key("distributedInfo").BeginObject().Key("backend").String(info.backend);
    // Kineto's spacing: HTA finds a file's rank by the text `"rank": N`.
    out.KeyWithSpace("rank").Int(info.rank).KeyWithSpace("world_size").Int(info.world_size);
    out.EndObject().Key("deviceProperties").BeginArray();
    for (const DeviceInfo& dev : info.devices) {
      out.BeginObject().Key("id").Int(dev.id).Key("name").String(dev.name);
      out.Key("totalGlobalMem").Int(dev.total_memory_bytes);
      out.Key("computeMajor").Int(dev.compute_major).Key("computeMinor").Int(dev.compute_minor);
      out.Key("numSms").Int(dev.sm_count);
      // Kineto's names; a limit the source did not give is left out, not written as 0.
      const std::pair<const char*, int64_t> limits[] = {
          {"maxThreadsPerMultiprocessor", dev.max_threads_per_sm},
          {"maxThreadsPerBlock", dev.max_threads_per_block},
          {"regsPerMultiprocessor", dev.registers_per_sm},
          {"regsPerBlock", dev.registers_per_block},
          {"sharedMemPerMultiprocessor", dev.shared_memory_per_sm},
          {"sharedMemPerBlockOptin", dev.shared_memory_per_block_optin}};
      for (const auto& [key, value] : limits) {
        if (value > 0) out.Key(key).Int(value);
      }
      out.EndObject();
    }
    out.EndArray();
  } else {
    // Worker descriptions come first so an importer can route events by pid in one pass.
    // Timestamps are microseconds since base_time_ns (the capture's first instant, whole
    // milliseconds): viewers read `ts` as a double, which keeps nanoseconds for hours after the
    // base but only ~250 ns at epoch microseconds. podscope's importer adds the base back.
    out.BeginObject().Key("schemaVersion").Int(1).Key("displayTimeUnit").String("ns");
    out.Key("podscope").BeginObject().Key("format").Int(1).Key("base_time_ns").Int(base_ns);
    out.Key("workers").BeginArray();
    for (size_t i = 0; i < described.size(); ++i) {
      const WorkerInfo& info = described[i].info;
      const ClockModel& clock = described[i].clock;
      out.BeginObject().Key("pid").Int(static_cast<int64_t>(i) + 1).Key("rank").Int(info.rank);
      out.Key("world_size").Int(info.world_size).Key("host").String(info.host);
      out.Key("job").String(info.job).Key("process_name").String(info.process_name);
      out.Key("original_pid").Int(info.pid).Key("backend").String(info.backend);
      out.Key("clock").BeginObject().Key("offset_ns").Int(clock.offset_ns);
      out.Key("drift_ppb").Int(clock.drift_ppb).Key("error_bound_ns").Int(clock.error_bound_ns);
      out.Key("source").String(ClockSourceName(clock.source)).EndObject();
      out.EndObject();
    }
    out.EndArray().EndObject();
  }
  out.Key("traceEvents").BeginArray(JsonWriter::kOneElementPerLine);
  uint64_t next_flow_id = 0;
  size_t done = 0;
  RETURN_IF_ERROR(workers.ForEachWorker([&](const WorkerTrace& w) -> absl::Status {
    if (done == described.size())
      return absl::InternalError("a capture's workers changed while it was exported");
    const int64_t pid =
        options.layout == ExportLayout::kKineto ? w.info.pid : static_cast<int64_t>(done) + 1;
    WorkerWriter writer(w, pid, options, &out, &stats.events, &next_flow_id, base_ns);
    RETURN_IF_ERROR(writer.Write(flush));
    ++done;
    if (progress) progress(done);
    return absl::OkStatus();
  }));
  out.EndArray().EndObject().EndLine();
  RETURN_IF_ERROR(flush());
  return stats;
}

absl::StatusOr<ExportStats> WriteChromeTrace(
    const CaptureView& capture, const ExportOptions& options,
    const std::function<absl::Status(std::string_view)>& sink,
    const std::function<void(size_t)>& progress) {
  ViewWorkers workers(capture);
  return WriteChromeTrace(workers, options, sink, progress);
}

absl::StatusOr<ExportStats> ExportChromeTraceFile(WorkerSource& workers, const std::string& path,
                                                  const ExportOptions& options,
                                                  const std::function<void(size_t)>& progress) {
  ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> file,
                   OutputFile::Open(path, std::string_view(path).ends_with(".gz")));
  ASSIGN_OR_RETURN(ExportStats stats,
                   WriteChromeTrace(
                       workers, options,
                       [&file](std::string_view data) { return file->Write(data); }, progress));
  RETURN_IF_ERROR(file->Close());
  return stats;
}

absl::StatusOr<ExportStats> ExportChromeTraceFile(const CaptureView& capture,
                                                  const std::string& path,
                                                  const ExportOptions& options,
                                                  const std::function<void(size_t)>& progress) {
  ViewWorkers workers(capture);
  return ExportChromeTraceFile(workers, path, options, progress);
}

}  // namespace podscope::common
