#include "common/perfetto/perfetto_exporter.h"

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/file_io.h"
#include "common/perfetto/proto_writer.h"
#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::common {
// Named apart so that a unity build's other exporters' helpers cannot clash with these.
namespace perfetto_export {
namespace {

constexpr size_t kFlushBytes = 1 << 20;
constexpr size_t kMaxLanes = 8;  // per track, the track itself included
// Thread ids as Perfetto takes them (int32, unique in a process): a host thread's own id when it
// is below kRemappedTids (Linux's are below 2^22), else one of [kRemappedTids, 2^30); GPU
// streams are at kStreamTrackBase (2^30) and above.
constexpr int64_t kRemappedTids = int64_t{1} << 29;

// Field numbers of perfetto_trace.proto.
namespace trace {
constexpr uint32_t kPacket = 1;
}
namespace packet {
constexpr uint32_t kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11, kInternedData = 12,
                   kSequenceFlags = 13, kTrackDescriptor = 60;
constexpr uint64_t kStateCleared = 1, kNeedsState = 2;
}  // namespace packet
namespace track {
constexpr uint32_t kUuid = 1, kName = 2, kProcess = 3, kThread = 4, kParentUuid = 5;
constexpr uint32_t kPid = 1, kProcessName = 6;                 // ProcessDescriptor
constexpr uint32_t kThreadPid = 1, kTid = 2, kThreadName = 5;  // ThreadDescriptor
}  // namespace track
namespace event {
constexpr uint32_t kCategoryIids = 3, kAnnotations = 4, kType = 9, kNameIid = 10, kTrackUuid = 11,
                   kFlowIds = 47, kTerminatingFlowIds = 48;
constexpr uint64_t kSliceBegin = 1, kSliceEnd = 2, kInstant = 3;
constexpr uint32_t kAnnotationNameIid = 1, kIntValue = 4, kStringValue = 6;
}  // namespace event
namespace interned {
constexpr uint32_t kCategories = 1, kNames = 2, kAnnotationNames = 3;
constexpr uint32_t kIid = 1, kName = 2;
}  // namespace interned

// Debug annotation names, interned once per sequence: iid = index + 1.
enum Arg : uint8_t {
  kDevice,
  kStream,
  kCorrelation,
  kGrid,
  kBlock,
  kRegisters,
  kSharedMemory,
  kBytes,
  kExternalId,
  kCollectiveName,
  kGroupSize,
  kSeq,
  kCommunicator,
  kAlgorithm,
  kProtocol,
  kDtype,
  kElements,
  kChannels,
  kDeviceId,
  kTotalAllocated,
  kTotalReserved,
  kArgCount
};
constexpr std::string_view kArgNames[kArgCount] = {"device",        "stream",
                                                   "correlation",   "grid",
                                                   "block",         "registers per thread",
                                                   "shared memory", "bytes",
                                                   "External id",   "Collective name",
                                                   "Group size",    "Seq",
                                                   "communicator",  "algorithm",
                                                   "protocol",      "dtype",
                                                   "In msg nelems", "channels",
                                                   "Device Id",     "Total Allocated",
                                                   "Total Reserved"};

enum class Kind : uint8_t { kKernel, kMemcpy, kRuntime, kHostSpan, kMemory };

// One slice or instant to write.
struct Item {
  TimeNs start = 0, end = 0;
  uint32_t lane = 0;  // track index after lanes are assigned
  Kind kind = Kind::kKernel;
  uint32_t row = 0;
};

// One begin, end or instant in writing order.
struct Emit {
  TimeNs ts = 0;
  uint32_t item = 0;
  uint8_t type = 0;  // event::kSliceBegin, kSliceEnd, kInstant
};

struct Track {
  std::string name;
  int64_t tid = 0;        // thread tracks
  bool is_thread = true;  // else a named track beside the threads (overlapping slices)
};

// Writes one worker as one packet sequence. Single-threaded.
class WorkerWriter {
 public:
  WorkerWriter(const WorkerTrace& w, uint32_t ordinal, const ExportOptions& options,
               ProtoWriter* out, uint64_t* next_flow_id, ExportStats* stats)
      : w_(w),
        ordinal_(ordinal),
        options_(options),
        out_(*out),
        next_flow_id_(*next_flow_id),
        stats_(*stats) {}

  template <typename Flush>
  absl::Status Write(Flush&& flush) {
    Collect();
    AssignLanes();
    WriteDescriptors();
    RETURN_IF_ERROR(flush());
    Flows();
    std::vector<Emit> emits = Order();
    bool first = true;
    for (const Emit& e : emits) {
      WriteEvent(e, first);
      first = false;
      if (out_.size() > kFlushBytes) RETURN_IF_ERROR(flush());
    }
    return absl::OkStatus();
  }

 private:
  uint64_t ProcessUuid() const { return uint64_t{ordinal_ + 1} << 32; }
  uint64_t TrackUuid(uint32_t track) const { return ProcessUuid() + track + 1; }
  int32_t Pid() const { return static_cast<int32_t>(ordinal_ + 1); }

  uint32_t ThreadTrack(int64_t thread) { return TrackOf(threads_, thread, false, 0); }
  int32_t ThreadId(int64_t thread) {
    if (thread >= 0 && thread < kRemappedTids) return static_cast<int32_t>(thread);
    auto [it, added] = remapped_tids_.emplace(thread, 0);
    if (added) it->second = static_cast<int32_t>(kRemappedTids + remapped_tids_.size() - 1);
    return it->second;
  }
  uint32_t StreamTrack(int32_t device, int64_t stream) {
    return TrackOf(streams_, StreamTrackId(device, stream), true, device);
  }
  uint32_t TrackOf(std::map<int64_t, uint32_t>& index, int64_t key, bool stream, int32_t device) {
    auto [it, added] = index.emplace(key, 0);
    if (added) {
      it->second = static_cast<uint32_t>(base_tracks_.size());
      Track t;
      t.tid = stream ? key : ThreadId(key);
      if (stream) {
        t.name = StrCat("GPU ", device, " stream ", key & 0xfffff);
      } else {
        t.name = StrCat("thread ", key);
        for (const TrackName& named : w_.info.tracks) {
          if (!named.is_stream && named.id == key) t.name = named.name;
        }
      }
      base_tracks_.push_back(std::move(t));
    }
    return it->second;
  }

  void Add(Kind kind, size_t row, uint32_t track, TimeNs start, TimeNs end) {
    const TimeNs a = w_.clock.ToAligned(start);
    const TimeNs b = w_.clock.ToAligned(end);
    items_.push_back({a, std::max(a, b), track, kind, static_cast<uint32_t>(row)});
  }

  void Collect() {
    const KernelTable& k = w_.kernels;
    for (size_t i = 0; i < k.size(); ++i)
      Add(Kind::kKernel, i, StreamTrack(k.device[i], k.stream[i]), k.start[i], k.end[i]);
    const MemcpyTable& m = w_.memcpys;
    for (size_t i = 0; i < m.size(); ++i)
      Add(Kind::kMemcpy, i, StreamTrack(m.device[i], m.stream[i]), m.start[i], m.end[i]);
    const RuntimeCallTable& r = w_.runtime_calls;
    for (size_t i = 0; i < r.size(); ++i)
      Add(Kind::kRuntime, i, ThreadTrack(r.thread[i]), r.start[i], r.end[i]);
    const HostSpanTable& h = w_.host_spans;
    for (size_t i = 0; i < h.size(); ++i) {
      const bool on_gpu = h.category[i] == HostSpanCategory::kGpuAnnotation;
      Add(Kind::kHostSpan, i, on_gpu ? StreamTrack(0, h.thread[i]) : ThreadTrack(h.thread[i]),
          h.start[i], h.end[i]);
    }
    const MemoryEventTable& mem = w_.memory_events;
    for (size_t i = 0; i < mem.size(); ++i)
      Add(Kind::kMemory, i, ThreadTrack(mem.thread[i]), mem.time[i], mem.time[i]);
  }

  // Slices on one track must nest. Those that overlap a slice without nesting in it (rare: clock
  // jitter, or a source's rounding) go to a lane of their own beside the track, so that no
  // event is cut or moved. At most kMaxLanes per track (a crafted trace could ask one per
  // slice): past them, a slice goes to the last lane and may be drawn mis-nested.
  void AssignLanes() {
    std::vector<std::vector<uint32_t>> by_track(base_tracks_.size());
    for (uint32_t i = 0; i < items_.size(); ++i) by_track[items_[i].lane].push_back(i);
    tracks_ = base_tracks_;
    lanes_.assign(tracks_.size(), {});
    for (uint32_t t = 0; t < by_track.size(); ++t) {
      std::vector<uint32_t>& order = by_track[t];
      std::sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
        const Item& x = items_[a];
        const Item& y = items_[b];
        if (x.start != y.start) return x.start < y.start;
        if (x.end != y.end) return x.end > y.end;  // the enclosing one first
        return a < b;
      });
      std::vector<uint32_t> lane_tracks = {t};
      std::vector<std::vector<uint32_t>> open(1);  // per lane: open items, innermost last
      for (uint32_t i : order) {
        const Item& item = items_[i];
        size_t lane = 0;
        for (;; ++lane) {
          if (lane == kMaxLanes) {
            lane = kMaxLanes - 1;
            break;
          }
          if (lane == lane_tracks.size()) {
            lane_tracks.push_back(static_cast<uint32_t>(tracks_.size()));
            Track extra;
            extra.name = StrCat(base_tracks_[t].name, " (overlapping ", lane, ")");
            extra.is_thread = false;
            tracks_.push_back(std::move(extra));
            lanes_.emplace_back();
            open.emplace_back();
          }
          std::vector<uint32_t>& stack = open[lane];
          while (!stack.empty() && items_[stack.back()].end <= item.start) stack.pop_back();
          if (stack.empty() || items_[stack.back()].end >= item.end) break;
        }
        open[lane].push_back(i);
        items_[i].lane = lane_tracks[lane];
        lanes_[lane_tracks[lane]].push_back(i);
      }
    }
  }

  // Begins, ends and instants in time order; on one track, as its slices nest.
  std::vector<Emit> Order() const {
    std::vector<Emit> emits;
    emits.reserve(items_.size() * 2);
    for (const std::vector<uint32_t>& lane : lanes_) {
      std::vector<uint32_t> open;
      auto close_until = [&](TimeNs t) {
        while (!open.empty() && items_[open.back()].end <= t) {
          emits.push_back({items_[open.back()].end, open.back(), event::kSliceEnd});
          open.pop_back();
        }
      };
      for (uint32_t i : lane) {
        const Item& item = items_[i];
        close_until(item.start);
        if (item.kind == Kind::kMemory) {
          emits.push_back({item.start, i, event::kInstant});
          continue;
        }
        emits.push_back({item.start, i, event::kSliceBegin});
        open.push_back(i);
      }
      close_until(INT64_MAX);
    }
    std::stable_sort(emits.begin(), emits.end(),
                     [](const Emit& a, const Emit& b) { return a.ts < b.ts; });
    return emits;
  }

  void WriteDescriptors() {
    size_t p = out_.Begin(trace::kPacket);
    out_.Varint(packet::kSequenceId, Sequence());
    size_t d = out_.Begin(packet::kTrackDescriptor);
    out_.Varint(track::kUuid, ProcessUuid());
    size_t proc = out_.Begin(track::kProcess);
    out_.Int(track::kPid, Pid());
    out_.Bytes(track::kProcessName, w_.info.DisplayName());
    out_.End(proc);
    out_.End(d);
    out_.End(p);
    for (uint32_t t = 0; t < tracks_.size(); ++t) {
      p = out_.Begin(trace::kPacket);
      out_.Varint(packet::kSequenceId, Sequence());
      d = out_.Begin(packet::kTrackDescriptor);
      out_.Varint(track::kUuid, TrackUuid(t));
      out_.Varint(track::kParentUuid, ProcessUuid());
      if (tracks_[t].is_thread) {
        const size_t thread = out_.Begin(track::kThread);
        out_.Int(track::kThreadPid, Pid());
        out_.Int(track::kTid, static_cast<int32_t>(tracks_[t].tid));
        out_.Bytes(track::kThreadName, tracks_[t].name);
        out_.End(thread);
      } else {
        out_.Bytes(track::kName, tracks_[t].name);
      }
      out_.End(d);
      out_.End(p);
    }
  }

  // Launch -> device flows: the runtime call starts each, its kernel or copy ends it.
  void Flows() {
    if (!options_.flows) return;
    absl::flat_hash_map<int64_t, uint32_t> launch_of;  // correlation -> runtime call row
    const RuntimeCallTable& r = w_.runtime_calls;
    for (size_t i = 0; i < r.size(); ++i) {
      if (r.correlation[i] >= 0) launch_of.emplace(r.correlation[i], static_cast<uint32_t>(i));
    }
    kernel_flow_.assign(w_.kernels.size(), 0);
    memcpy_flow_.assign(w_.memcpys.size(), 0);
    auto link = [&](int64_t correlation, uint64_t* flow) {
      if (correlation < 0) return;
      auto it = launch_of.find(correlation);
      if (it == launch_of.end()) return;
      *flow = ++next_flow_id_;
      launch_flows_.emplace(it->second, *flow);
    };
    for (size_t i = 0; i < w_.kernels.size(); ++i)
      link(w_.kernels.correlation[i], &kernel_flow_[i]);
    for (size_t i = 0; i < w_.memcpys.size(); ++i)
      link(w_.memcpys.correlation[i], &memcpy_flow_[i]);
  }

  uint64_t Sequence() const { return ordinal_ + 1; }

  // The iid of `text` in `table`, adding it to this packet's interned data when new.
  uint64_t Intern(absl::flat_hash_map<std::string, uint64_t>& table,
                  std::vector<std::pair<uint64_t, std::string_view>>& fresh,
                  std::string_view text) {
    auto [it, added] = table.emplace(std::string(text), table.size() + 1);
    if (added) fresh.emplace_back(it->second, it->first);
    return it->second;
  }

  void WriteEvent(const Emit& e, bool first) {
    const Item& item = items_[e.item];
    std::string_view name, category;
    if (e.type != event::kSliceEnd) Describe(item, &name, &category);
    std::vector<std::pair<uint64_t, std::string_view>> fresh_names, fresh_categories;
    uint64_t name_iid = 0, category_iid = 0;
    if (e.type != event::kSliceEnd) {
      name_iid = Intern(names_, fresh_names, name);
      category_iid = Intern(categories_, fresh_categories, category);
    }
    const size_t p = out_.Begin(trace::kPacket);
    out_.Varint(packet::kTimestamp, static_cast<uint64_t>(std::max<TimeNs>(e.ts, 0)));
    out_.Varint(packet::kSequenceId, Sequence());
    out_.Varint(packet::kSequenceFlags,
                first ? packet::kStateCleared | packet::kNeedsState : packet::kNeedsState);
    if (first || !fresh_names.empty() || !fresh_categories.empty()) {
      const size_t data = out_.Begin(packet::kInternedData);
      for (const auto& [iid, text] : fresh_categories)
        InternedEntry(interned::kCategories, iid, text);
      for (const auto& [iid, text] : fresh_names) InternedEntry(interned::kNames, iid, text);
      if (first) {
        for (uint64_t a = 0; a < kArgCount; ++a)
          InternedEntry(interned::kAnnotationNames, a + 1, kArgNames[a]);
      }
      out_.End(data);
    }
    const size_t te = out_.Begin(packet::kTrackEvent);
    out_.Varint(event::kType, e.type);
    out_.Varint(event::kTrackUuid, TrackUuid(item.lane));
    if (e.type != event::kSliceEnd) {
      out_.Varint(event::kNameIid, name_iid);
      out_.Varint(event::kCategoryIids, category_iid);
      WriteArgs(item);
      ++stats_.events;
    }
    out_.End(te);
    out_.End(p);
  }

  void InternedEntry(uint32_t field, uint64_t iid, std::string_view text) {
    const size_t entry = out_.Begin(field);
    out_.Varint(interned::kIid, iid);
    out_.Bytes(interned::kName, text);
    out_.End(entry);
  }

  void Describe(const Item& item, std::string_view* name, std::string_view* category) const {
    const size_t i = item.row;
    switch (item.kind) {
      case Kind::kKernel:
        *name = w_.strings.Get(w_.kernels.name[i]);
        *category = w_.kernels.kernel_class[i] == KernelClass::kSync ? "cuda_sync" : "kernel";
        return;
      case Kind::kMemcpy:
        *name = w_.strings.Get(w_.memcpys.name[i]);
        *category = w_.memcpys.kind[i] == MemcpyKind::kMemset ? "gpu_memset" : "gpu_memcpy";
        return;
      case Kind::kRuntime:
        *name = w_.strings.Get(w_.runtime_calls.name[i]);
        *category =
            w_.runtime_calls.api_kind[i] == ApiKind::kDriver ? "cuda_driver" : "cuda_runtime";
        return;
      case Kind::kHostSpan:
        *name = w_.strings.Get(w_.host_spans.name[i]);
        *category = KinetoCategory(w_.host_spans.category[i]);
        return;
      case Kind::kMemory:
        *name = "[memory]";
        *category = "cpu_instant_event";
        return;
    }
  }

  void IntArg(Arg arg, int64_t value) {
    const size_t a = out_.Begin(event::kAnnotations);
    out_.Varint(event::kAnnotationNameIid, arg + 1);
    out_.Int(event::kIntValue, value);
    out_.End(a);
  }
  void TextArg(Arg arg, std::string_view value) {
    const size_t a = out_.Begin(event::kAnnotations);
    out_.Varint(event::kAnnotationNameIid, arg + 1);
    out_.Bytes(event::kStringValue, value);
    out_.End(a);
  }

  void WriteArgs(const Item& item) {
    const size_t i = item.row;
    switch (item.kind) {
      case Kind::kKernel: {
        const KernelTable& k = w_.kernels;
        IntArg(kDevice, k.device[i]);
        IntArg(kStream, k.stream[i]);
        IntArg(kCorrelation, k.correlation[i]);
        if (k.kernel_class[i] != KernelClass::kSync) {
          TextArg(kGrid, StrCat(k.grid_x[i], ",", k.grid_y[i], ",", k.grid_z[i]));
          TextArg(kBlock, StrCat(k.block_x[i], ",", k.block_y[i], ",", k.block_z[i]));
          IntArg(kRegisters, k.registers_per_thread[i]);
          IntArg(kSharedMemory, k.shared_memory_bytes[i]);
        }
        if (auto c = CollectiveOf(k.correlation[i]); c >= 0) CollectiveArgs(static_cast<size_t>(c));
        if (!kernel_flow_.empty() && kernel_flow_[i] != 0)
          out_.Fixed64(event::kTerminatingFlowIds, kernel_flow_[i]);
        return;
      }
      case Kind::kMemcpy: {
        const MemcpyTable& m = w_.memcpys;
        IntArg(kDevice, m.device[i]);
        IntArg(kStream, m.stream[i]);
        IntArg(kCorrelation, m.correlation[i]);
        IntArg(kBytes, m.bytes[i]);
        if (!memcpy_flow_.empty() && memcpy_flow_[i] != 0)
          out_.Fixed64(event::kTerminatingFlowIds, memcpy_flow_[i]);
        return;
      }
      case Kind::kRuntime: {
        const RuntimeCallTable& r = w_.runtime_calls;
        IntArg(kCorrelation, r.correlation[i]);
        if (r.external_id[i] >= 0) IntArg(kExternalId, r.external_id[i]);
        auto [from, to] = launch_flows_.equal_range(static_cast<uint32_t>(i));
        for (auto it = from; it != to; ++it) out_.Fixed64(event::kFlowIds, it->second);
        return;
      }
      case Kind::kHostSpan:
        if (w_.host_spans.external_id[i] >= 0) IntArg(kExternalId, w_.host_spans.external_id[i]);
        return;
      case Kind::kMemory: {
        const MemoryEventTable& mem = w_.memory_events;
        IntArg(kDeviceId, mem.device[i]);
        IntArg(kBytes, mem.bytes[i]);
        if (mem.total_allocated[i] >= 0) IntArg(kTotalAllocated, mem.total_allocated[i]);
        if (mem.total_reserved[i] >= 0) IntArg(kTotalReserved, mem.total_reserved[i]);
        return;
      }
    }
  }

  int64_t CollectiveOf(int64_t correlation) {
    if (correlation < 0) return -1;
    if (!collectives_indexed_) {
      for (size_t c = 0; c < w_.collectives.size(); ++c) {
        if (w_.collectives.correlation[c] >= 0)
          collective_of_.emplace(w_.collectives.correlation[c], c);
      }
      collectives_indexed_ = true;
    }
    auto it = collective_of_.find(correlation);
    return it == collective_of_.end() ? -1 : static_cast<int64_t>(it->second);
  }

  void CollectiveArgs(size_t i) {
    const CollectiveTable& c = w_.collectives;
    TextArg(kCollectiveName, CollectiveOpName(c.op[i]));
    IntArg(kElements, c.count[i]);
    TextArg(kDtype, w_.strings.Get(c.dtype[i]));
    IntArg(kGroupSize, c.nranks[i]);
    if (c.sequence[i] != kUnknownSequence) IntArg(kSeq, c.sequence[i]);
    TextArg(kCommunicator, w_.strings.Get(c.communicator[i]));
    TextArg(kAlgorithm, w_.strings.Get(c.algorithm[i]));
    TextArg(kProtocol, w_.strings.Get(c.protocol[i]));
    IntArg(kChannels, c.channels[i]);
  }

  const WorkerTrace& w_;
  const uint32_t ordinal_;
  const ExportOptions& options_;
  ProtoWriter& out_;
  uint64_t& next_flow_id_;
  ExportStats& stats_;

  std::map<int64_t, uint32_t> threads_, streams_;  // tid or stream track id -> track
  std::map<int64_t, int32_t> remapped_tids_;       // host thread ids Perfetto cannot take
  std::vector<Track> base_tracks_, tracks_;        // tracks_: base ones, then overlap lanes
  std::vector<Item> items_;
  std::vector<std::vector<uint32_t>> lanes_;  // per track: its items, by start
  std::vector<uint64_t> kernel_flow_, memcpy_flow_;
  std::multimap<uint32_t, uint64_t> launch_flows_;  // runtime call row -> flows it starts
  absl::flat_hash_map<int64_t, size_t> collective_of_;
  bool collectives_indexed_ = false;
  absl::flat_hash_map<std::string, uint64_t> names_, categories_;
};

}  // namespace
}  // namespace perfetto_export

absl::StatusOr<ExportStats> WritePerfettoTrace(
    WorkerSource& workers, const ExportOptions& options,
    const std::function<absl::Status(std::string_view)>& sink,
    const std::function<void(size_t)>& progress) {
  ExportStats stats;
  ProtoWriter out;
  auto flush = [&]() -> absl::Status {
    if (out.size() == 0) return absl::OkStatus();
    stats.bytes += out.size();
    absl::Status status = sink(out.buffer());
    out.Clear();
    return status;
  };
  uint64_t next_flow_id = 0;
  uint32_t done = 0;
  RETURN_IF_ERROR(workers.ForEachWorker([&](const WorkerTrace& w) -> absl::Status {
    perfetto_export::WorkerWriter writer(w, done, options, &out, &next_flow_id, &stats);
    RETURN_IF_ERROR(writer.Write(flush));
    RETURN_IF_ERROR(flush());
    ++done;
    if (progress) progress(done);
    return absl::OkStatus();
  }));
  return stats;
}

absl::StatusOr<ExportStats> ExportPerfettoTraceFile(WorkerSource& workers, const std::string& path,
                                                    const ExportOptions& options,
                                                    const std::function<void(size_t)>& progress) {
  ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> file,
                   OutputFile::Open(path, std::string_view(path).ends_with(".gz")));
  ASSIGN_OR_RETURN(ExportStats stats,
                   WritePerfettoTrace(
                       workers, options,
                       [&file](std::string_view data) { return file->Write(data); }, progress));
  RETURN_IF_ERROR(file->Close());
  return stats;
}

}  // namespace podscope::common
