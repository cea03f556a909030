#include "agent/probe/cupti_records.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "common/kineto/nccl_names.h"
#include "common/str_util.h"

namespace podscope::agent::probe {

namespace {

using common::KernelClass;
using common::MemcpyKind;
using common::TimeNs;

MemcpyKind KindOfCopy(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return MemcpyKind::kHostToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return MemcpyKind::kDeviceToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return MemcpyKind::kDeviceToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return MemcpyKind::kHostToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return MemcpyKind::kPeerToPeer;
    default:
      return MemcpyKind::kUnknown;
  }
}

std::string_view CopyLabel(MemcpyKind kind) {
  switch (kind) {
    case MemcpyKind::kHostToDevice:
      return "Memcpy HtoD";
    case MemcpyKind::kDeviceToHost:
      return "Memcpy DtoH";
    case MemcpyKind::kDeviceToDevice:
      return "Memcpy DtoD";
    case MemcpyKind::kHostToHost:
      return "Memcpy HtoH";
    case MemcpyKind::kPeerToPeer:
      return "Memcpy PtoP";
    case MemcpyKind::kMemset:
      return "Memset";
    default:
      return "Memcpy";
  }
}

std::string_view SyncLabel(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "cudaEventSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return "cudaStreamWaitEvent";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "cudaStreamSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "cudaDeviceSynchronize";
    default:
      return "cudaSynchronize";
  }
}

// Keeps the rows whose `keep` is set, in order, in every column.
template <typename Table>
void KeepRows(Table& table, const std::vector<uint8_t>& keep) {
  table.ForEachColumn([&keep](auto& column) {
    size_t out = 0;
    for (size_t i = 0; i < column.size(); ++i) {
      if (keep[i]) column[out++] = std::move(column[i]);
    }
    column.resize(out);
  });
}

// Maps a table's times (`end` null: one time per row) from the CUPTI clock onto the host's and
// keeps the rows whose times are true; the others are counted in `dropped` under `what`.
template <typename Table>
void MapKeepingTrueTimes(Table& table, std::vector<TimeNs>* start, std::vector<TimeNs>* end,
                         const GpuClockMap& clock, const std::optional<HostWindow>& window,
                         std::string_view what, std::map<std::string, uint64_t>* dropped) {
  std::vector<uint8_t> keep(start->size(), 1);
  bool any_dropped = false;
  auto drop = [&](size_t row, std::string_view reason) {
    keep[row] = 0;
    any_dropped = true;
    ++(*dropped)[common::StrCat(what, ": ", reason)];
  };
  for (size_t i = 0; i < start->size(); ++i) {
    const TimeNs gpu_start = (*start)[i];
    const TimeNs gpu_end = end != nullptr ? (*end)[i] : gpu_start;
    if (gpu_start <= 0 || gpu_end <= 0) {
      drop(i, "no time");
      continue;
    }
    if (gpu_end < gpu_start) {
      drop(i, "ends before it starts");
      continue;
    }
    const TimeNs host_start = clock.ToHost(static_cast<uint64_t>(gpu_start));
    const TimeNs host_end = end != nullptr ? clock.ToHost(static_cast<uint64_t>(gpu_end)) : 0;
    (*start)[i] = host_start;
    if (end != nullptr) (*end)[i] = host_end;
    if (window && host_start < window->first_ns) {
      drop(i, "before the window");
    } else if (window && (end != nullptr ? host_end : host_start) > window->last_ns) {
      drop(i, "after the window");
    }
  }
  if (any_dropped) KeepRows(table, keep);
}

template <typename Row>
void PushCopy(common::WorkerTrace& t, const Row& r, MemcpyKind kind, int64_t bytes) {
  common::MemcpyTable& m = t.memcpys;
  m.start.push_back(static_cast<TimeNs>(r.start));
  m.end.push_back(static_cast<TimeNs>(r.end));
  m.device.push_back(static_cast<int32_t>(r.deviceId));
  m.stream.push_back(static_cast<int32_t>(r.streamId));
  m.name.push_back(t.strings.Intern(CopyLabel(kind)));
  m.bytes.push_back(bytes);
  m.correlation.push_back(r.correlationId);
  m.kind.push_back(kind);
}

}  // namespace

CuptiRecordConverter::CuptiRecordConverter(
    std::function<std::string(CUpti_CallbackDomain, uint32_t)> callback_name,
    const std::string& step_pattern)
    : callback_name_(std::move(callback_name)) {
  // An invalid pattern is logged once at load (probe_runtime.cc); no range is then a step.
  if (absl::StatusOr<common::StepPattern> pattern = common::StepPattern::Compile(step_pattern);
      pattern.ok()) {
    step_pattern_ = *std::move(pattern);
  }
}

common::NameId CuptiRecordConverter::KernelName(const char* mangled) {
  if (mangled == nullptr) return common::kEmptyName;
  if (auto it = kernel_names_.find(mangled); it != kernel_names_.end()) return it->second;
  int status = -1;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  const common::NameId id =
      trace_.strings.Intern(status == 0 && demangled != nullptr ? demangled : mangled);
  std::free(demangled);
  kernel_names_.emplace(mangled, id);
  return id;
}

common::NameId CuptiRecordConverter::ApiName(CUpti_CallbackDomain domain, uint32_t cbid) {
  const uint64_t key = (static_cast<uint64_t>(domain) << 32) | cbid;
  if (auto it = api_names_.find(key); it != api_names_.end()) return it->second;
  std::string name = callback_name_ ? callback_name_(domain, cbid) : std::string();
  if (name.empty())
    name = (domain == CUPTI_CB_DOMAIN_DRIVER_API ? "driver api " : "runtime api ") +
           std::to_string(cbid);
  const common::NameId id = trace_.strings.Intern(name);
  api_names_.emplace(key, id);
  return id;
}

bool CuptiRecordConverter::Add(const CUpti_Activity* record) {
  common::WorkerTrace& t = trace_;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& k = *reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      common::KernelTable& kt = t.kernels;
      kt.start.push_back(static_cast<TimeNs>(k.start));
      kt.end.push_back(static_cast<TimeNs>(k.end));
      kt.device.push_back(static_cast<int32_t>(k.deviceId));
      kt.stream.push_back(static_cast<int32_t>(k.streamId));
      const common::NameId name = KernelName(k.name);
      kt.name.push_back(name);
      kt.correlation.push_back(k.correlationId);
      kt.grid_x.push_back(static_cast<uint32_t>(k.gridX));
      kt.grid_y.push_back(static_cast<uint32_t>(k.gridY));
      kt.grid_z.push_back(static_cast<uint32_t>(k.gridZ));
      kt.block_x.push_back(static_cast<uint32_t>(k.blockX));
      kt.block_y.push_back(static_cast<uint32_t>(k.blockY));
      kt.block_z.push_back(static_cast<uint32_t>(k.blockZ));
      kt.registers_per_thread.push_back(k.registersPerThread);
      kt.shared_memory_bytes.push_back(k.staticSharedMemory + k.dynamicSharedMemory);
      kt.kernel_class.push_back(common::IsNcclKernelName(t.strings.Get(name))
                                    ? KernelClass::kCommunication
                                    : KernelClass::kCompute);
      sync_contexts_.push_back(UINT32_MAX);
      context_devices_[k.contextId] = static_cast<int32_t>(k.deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& m = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      PushCopy(t, m, KindOfCopy(m.copyKind), static_cast<int64_t>(m.bytes));
      context_devices_[m.contextId] = static_cast<int32_t>(m.deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      const auto& m = *reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
      PushCopy(t, m, MemcpyKind::kPeerToPeer, static_cast<int64_t>(m.bytes));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& m = *reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      PushCopy(t, m, MemcpyKind::kMemset, static_cast<int64_t>(m.bytes));
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto& a = *reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const bool driver = record->kind == CUPTI_ACTIVITY_KIND_DRIVER;
      common::RuntimeCallTable& r = t.runtime_calls;
      r.start.push_back(static_cast<TimeNs>(a.start));
      r.end.push_back(static_cast<TimeNs>(a.end));
      r.thread.push_back(a.threadId);
      r.name.push_back(
          ApiName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, a.cbid));
      r.correlation.push_back(a.correlationId);
      r.external_id.push_back(0);  // filled from external-correlation records at Finish
      r.api_kind.push_back(driver ? common::ApiKind::kDriver : common::ApiKind::kRuntime);
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& s = *reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      common::KernelTable& kt = t.kernels;
      kt.start.push_back(static_cast<TimeNs>(s.start));
      kt.end.push_back(static_cast<TimeNs>(s.end));
      kt.device.push_back(-1);  // from the context, at Finish
      kt.stream.push_back(s.streamId == UINT32_MAX ? -1 : static_cast<int32_t>(s.streamId));
      kt.name.push_back(t.strings.Intern(SyncLabel(s.type)));
      kt.correlation.push_back(s.correlationId);
      for (auto* col : {&kt.grid_x, &kt.grid_y, &kt.grid_z, &kt.block_x, &kt.block_y, &kt.block_z})
        col->push_back(0);
      kt.registers_per_thread.push_back(0);
      kt.shared_memory_bytes.push_back(0);
      kt.kernel_class.push_back(KernelClass::kSync);
      sync_contexts_.push_back(s.contextId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto& e = *reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      external_ids_[e.correlationId] = static_cast<int64_t>(e.externalId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MARKER:
      AddMarker(*reinterpret_cast<const CUpti_ActivityMarker2*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      // Device memory taken from CUDA (cudaMalloc, pools) and given back: with a caching
      // allocator (PyTorch's), what it reserves. Other memory kinds are not device memory.
      const auto& m = *reinterpret_cast<const CUpti_ActivityMemory4*>(record);
      const bool allocation =
          m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
      if (m.memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE || m.bytes > (uint64_t{1} << 50) ||
          (!allocation && m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)) {
        break;
      }
      common::MemoryEventTable& me = t.memory_events;
      me.time.push_back(static_cast<TimeNs>(m.timestamp));
      me.device.push_back(static_cast<int32_t>(m.deviceId));
      me.bytes.push_back(allocation ? static_cast<int64_t>(m.bytes)
                                    : -static_cast<int64_t>(m.bytes));
      me.total_allocated.push_back(common::kUnknownBytes);
      me.total_reserved.push_back(common::kUnknownBytes);
      me.thread.push_back(0);  // CUPTI's memory records name no thread
      break;
    }
    default:
      return false;
  }
  ++records_;
  return true;
}

void CuptiRecordConverter::AddMarker(const CUpti_ActivityMarker2& m) {
  const int64_t thread = m.objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? m.objectId.pt.threadId : 0;
  if ((m.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0) {
    open_ranges_[m.id] = OpenRange{m.timestamp, m.name != nullptr ? m.name : "", thread};
    return;
  }
  if ((m.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) == 0) return;  // instantaneous marks: no span
  auto it = open_ranges_.find(m.id);
  if (it == open_ranges_.end()) return;  // opened before the window: no start to pair with
  const OpenRange& open = it->second;
  common::HostSpanTable& h = trace_.host_spans;
  const int64_t step = StepNumberOf(open.name);
  h.start.push_back(static_cast<TimeNs>(open.start));
  h.end.push_back(static_cast<TimeNs>(m.timestamp));
  h.thread.push_back(open.thread);
  h.name.push_back(trace_.strings.Intern(open.name));
  h.category.push_back(common::HostSpanCategory::kAnnotation);
  h.step.push_back(step);
  h.external_id.push_back(0);
  if (step != common::kNoStep) {
    trace_.steps.number.push_back(step);
    trace_.steps.start.push_back(static_cast<TimeNs>(open.start));
    trace_.steps.end.push_back(static_cast<TimeNs>(m.timestamp));
    trace_.steps.thread.push_back(open.thread);
  }
  open_ranges_.erase(it);
}

int64_t CuptiRecordConverter::StepNumberOf(std::string_view name) const {
  if (!step_pattern_) return common::kNoStep;
  return step_pattern_->Find(name).number.value_or(common::kNoStep);
}

common::WorkerTrace CuptiRecordConverter::Finish(const GpuClockMap& clock) {
  common::WorkerTrace t = Take(clock, true);
  external_ids_.clear();
  open_ranges_.clear();
  window_open_ns_.reset();
  // context_devices_ stays: a later window's sync records may name a context seen before.
  return t;
}

std::map<std::string, uint64_t> CuptiRecordConverter::TakeDropped() {
  return std::exchange(dropped_, {});
}

common::WorkerTrace CuptiRecordConverter::Take(const GpuClockMap& clock, bool at_end) {
  common::WorkerTrace t = std::move(trace_);
  for (size_t i = 0; i < t.runtime_calls.size(); ++i) {
    auto it = external_ids_.find(static_cast<uint32_t>(t.runtime_calls.correlation[i]));
    if (it != external_ids_.end()) t.runtime_calls.external_id[i] = it->second;
  }
  for (size_t i = 0; i < t.kernels.size() && i < sync_contexts_.size(); ++i) {
    if (sync_contexts_[i] == UINT32_MAX) continue;
    auto it = context_devices_.find(sync_contexts_[i]);
    t.kernels.device[i] = it != context_devices_.end() ? it->second : 0;
  }
  std::optional<HostWindow> window;
  if (const std::optional<HostWindow> pairs = clock.Window(); pairs || window_open_ns_) {
    TimeNs first = pairs ? pairs->first_ns : INT64_MAX;
    if (window_open_ns_) first = std::min(first, *window_open_ns_);
    const bool ends = at_end && pairs && pairs->last_ns != INT64_MAX;
    window = HostWindow{first - kClockMappingSlackNs,
                        ends ? pairs->last_ns + kClockMappingSlackNs : INT64_MAX};
  }
  MapKeepingTrueTimes(t.kernels, &t.kernels.start, &t.kernels.end, clock, window, "kernels",
                      &dropped_);
  MapKeepingTrueTimes(t.memcpys, &t.memcpys.start, &t.memcpys.end, clock, window,
                      "copies and memsets", &dropped_);
  MapKeepingTrueTimes(t.runtime_calls, &t.runtime_calls.start, &t.runtime_calls.end, clock, window,
                      "CUDA calls", &dropped_);
  MapKeepingTrueTimes(t.host_spans, &t.host_spans.start, &t.host_spans.end, clock, window,
                      "NVTX ranges", &dropped_);
  std::map<std::string, uint64_t> same_as_their_ranges;  // a step is also an NVTX range
  MapKeepingTrueTimes(t.steps, &t.steps.start, &t.steps.end, clock, window, "steps",
                      &same_as_their_ranges);
  MapKeepingTrueTimes(t.memory_events, &t.memory_events.time, nullptr, clock, window,
                      "memory records", &dropped_);
  // Names are ids into the handed-over trace's strings: the next take interns them afresh.
  trace_ = common::WorkerTrace();
  records_ = 0;
  kernel_names_.clear();
  api_names_.clear();
  sync_contexts_.clear();
  return t;
}

}  // namespace podscope::agent::probe
