#include "common/kineto/trace_builder.h"

#include <algorithm>
#include <charconv>

#include "absl/container/flat_hash_map.h"
#include "common/kineto/nccl_names.h"
#include "common/str_util.h"

namespace podscope::common {
namespace {

int64_t OrDefault(int64_t v, int64_t fallback) { return v == kAbsent ? fallback : v; }

MemcpyKind MemcpyKindFromName(std::string_view name) {
  // Kineto: "Memcpy HtoD (Pinned -> Device)", "Memcpy DtoD (Device -> Device)", "Memcpy PtoP".
  if (Contains(name, "HtoD")) return MemcpyKind::kHostToDevice;
  if (Contains(name, "DtoH")) return MemcpyKind::kDeviceToHost;
  if (Contains(name, "DtoD")) return MemcpyKind::kDeviceToDevice;
  if (Contains(name, "PtoP")) return MemcpyKind::kPeerToPeer;
  if (Contains(name, "HtoH")) return MemcpyKind::kHostToHost;
  return MemcpyKind::kUnknown;
}

// Input and optimizer work is recognised by name whatever category the source gave it.
HostSpanCategory ClassifyHostSpan(std::string_view name, HostSpanCategory by_category) {
  if (by_category == HostSpanCategory::kGpuAnnotation) return by_category;
  if (Contains(name, "DataLoader") || Contains(name, "dataloader") || Contains(name, "data_load")) {
    return HostSpanCategory::kInput;
  }
  if (name.starts_with("Optimizer.")) return HostSpanCategory::kOptimizer;
  return by_category;
}

// Fills the fields of `into` that are still absent from `from`.
void MergeMissing(const RawCollectiveArgs& from, RawCollectiveArgs* into) {
  auto fill_sv = [](std::string_view src, std::string_view* dst) {
    if (dst->empty()) *dst = src;
  };
  auto fill_int = [](int64_t src, int64_t* dst) {
    if (*dst == kAbsent) *dst = src;
  };
  fill_sv(from.collective_name, &into->collective_name);
  fill_sv(from.dtype, &into->dtype);
  fill_sv(from.group_name, &into->group_name);
  fill_sv(from.group_desc, &into->group_desc);
  fill_sv(from.group_ranks, &into->group_ranks);
  fill_sv(from.comms_id, &into->comms_id);
  fill_int(from.in_nelems, &into->in_nelems);
  fill_int(from.out_nelems, &into->out_nelems);
  fill_int(from.group_size, &into->group_size);
  fill_int(from.seq, &into->seq);
  fill_int(from.input_elements, &into->input_elements);
  fill_sv(from.input_type, &into->input_type);
  fill_sv(from.algorithm, &into->algorithm);
  fill_sv(from.protocol, &into->protocol);
  fill_sv(from.communicator, &into->communicator);
  fill_int(from.channels, &into->channels);
}

std::vector<int32_t> ParseRankList(std::string_view text) {
  std::vector<int32_t> ranks;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  while (p < end) {
    int32_t r = 0;
    auto [next, ec] = std::from_chars(p, end, r);
    if (ec == std::errc()) {
      ranks.push_back(r);
      p = next;
    } else {
      ++p;  // separators: '[', ']', ',', ' '
    }
  }
  return ranks;
}

}  // namespace

bool IsCommunicationOpName(std::string_view name) {
  return name == "record_param_comms" || name.starts_with("nccl:") || name.starts_with("c10d::");
}

int64_t ProfilerStepNumber(std::string_view name) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (!name.starts_with(kPrefix)) return -1;
  name.remove_prefix(kPrefix.size());
  int64_t step = -1;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), step);
  if (ec != std::errc() || ptr != name.data() + name.size() || step < 0) return -1;
  return step;
}

void TraceBuilder::Add(const RawEvent& e, ImportStats* stats) {
  ++stats->events;
  if (e.ph == 'M') {
    ++stats->metadata;
    AddMetadata(e);
    return;
  }
  if (e.ph == 's' || e.ph == 'f' || e.ph == 't') {
    ++stats->flows;
    return;
  }
  if ((e.ph == 'i' || e.ph == 'I') && e.name == "[memory]") {
    AddMemoryEvent(e, stats);
    return;
  }
  if (e.ph != 'X') {
    ++stats->skipped;
    return;
  }
  const std::string_view cat = e.cat;
  if (cat == "kernel") {
    AddKernel(e, KernelClass::kCompute);  // refined from the name in AddKernel
  } else if (cat == "cpu_op") {
    AddHostSpan(e, HostSpanCategory::kOp);
  } else if (cat == "cuda_runtime") {
    AddRuntimeCall(e, ApiKind::kRuntime);
  } else if (cat == "user_annotation") {
    AddHostSpan(e, HostSpanCategory::kAnnotation);
  } else if (cat == "gpu_memcpy") {
    AddMemcpy(e, /*memset=*/false);
  } else if (cat == "gpu_memset") {
    AddMemcpy(e, /*memset=*/true);
  } else if (cat == "cuda_driver") {
    AddRuntimeCall(e, ApiKind::kDriver);
  } else if (cat == "python_function") {
    AddHostSpan(e, HostSpanCategory::kPython);
  } else if (cat == "gpu_user_annotation") {
    AddHostSpan(e, HostSpanCategory::kGpuAnnotation);
  } else if (cat == "cuda_sync") {
    AddKernel(e, KernelClass::kSync);
  } else if (cat == "Trace") {
    ++stats->profiler_spans;
    return;
  } else {
    ++stats->skipped;
    return;
  }
  ++stats->kept;
}

void TraceBuilder::AddKernel(const RawEvent& e, KernelClass kernel_class) {
  // Kernels arrive as kCompute or kSync; NCCL kernels are recognised by name here.
  KernelTable& k = trace_->kernels;
  const RawArgs& a = e.args;
  k.start.push_back(e.ts);
  k.end.push_back(e.ts + e.dur);
  k.device.push_back(static_cast<int32_t>(OrDefault(a.device, OrDefault(e.pid, 0))));
  k.stream.push_back(static_cast<int32_t>(OrDefault(a.stream, OrDefault(e.tid, 0))));
  const NameId name = trace_->strings.Intern(e.name);
  if (kernel_class == KernelClass::kCompute && KernelClassOf(name) == 1) {
    kernel_class = KernelClass::kCommunication;
  }
  k.name.push_back(name);
  k.correlation.push_back(OrDefault(a.correlation, -1));
  k.grid_x.push_back(static_cast<uint32_t>(a.grid[0]));
  k.grid_y.push_back(static_cast<uint32_t>(a.grid[1]));
  k.grid_z.push_back(static_cast<uint32_t>(a.grid[2]));
  k.block_x.push_back(static_cast<uint32_t>(a.block[0]));
  k.block_y.push_back(static_cast<uint32_t>(a.block[1]));
  k.block_z.push_back(static_cast<uint32_t>(a.block[2]));
  k.registers_per_thread.push_back(static_cast<int32_t>(a.registers));
  k.shared_memory_bytes.push_back(static_cast<int32_t>(a.shared_memory));
  k.kernel_class.push_back(kernel_class);
  if (kernel_class == KernelClass::kCommunication) {
    comm_kernels_.push_back(CommKernel{k.size() - 1, Kept(a.collective)});
  }
}

void TraceBuilder::AddMemcpy(const RawEvent& e, bool memset) {
  MemcpyTable& m = trace_->memcpys;
  const RawArgs& a = e.args;
  m.start.push_back(e.ts);
  m.end.push_back(e.ts + e.dur);
  m.device.push_back(static_cast<int32_t>(OrDefault(a.device, OrDefault(e.pid, 0))));
  m.stream.push_back(static_cast<int32_t>(OrDefault(a.stream, OrDefault(e.tid, 0))));
  m.name.push_back(trace_->strings.Intern(e.name));
  m.bytes.push_back(OrDefault(a.bytes, 0));
  m.correlation.push_back(OrDefault(a.correlation, -1));
  m.kind.push_back(memset ? MemcpyKind::kMemset : MemcpyKindFromName(e.name));
}

void TraceBuilder::AddRuntimeCall(const RawEvent& e, ApiKind api_kind) {
  NoteHostPid(e.pid);
  RuntimeCallTable& r = trace_->runtime_calls;
  r.start.push_back(e.ts);
  r.end.push_back(e.ts + e.dur);
  r.thread.push_back(OrDefault(e.tid, 0));
  r.name.push_back(trace_->strings.Intern(e.name));
  r.correlation.push_back(OrDefault(e.args.correlation, -1));
  r.external_id.push_back(OrDefault(e.args.external_id, -1));
  r.api_kind.push_back(api_kind);
}

void TraceBuilder::AddHostSpan(const RawEvent& e, HostSpanCategory category) {
  const bool on_gpu = category == HostSpanCategory::kGpuAnnotation;
  if (!on_gpu) NoteHostPid(e.pid);
  HostSpanTable& h = trace_->host_spans;
  const int64_t thread =
      on_gpu ? OrDefault(e.args.stream, OrDefault(e.tid, 0)) : OrDefault(e.tid, 0);
  const int64_t step = on_gpu ? -1 : ProfilerStepNumber(e.name);
  h.start.push_back(e.ts);
  h.end.push_back(e.ts + e.dur);
  h.thread.push_back(thread);
  const NameId name = trace_->strings.Intern(e.name);
  h.name.push_back(name);
  h.category.push_back(static_cast<HostSpanCategory>(HostCategoryOf(name, category)));
  h.step.push_back(step >= 0 ? step : kNoStep);
  h.external_id.push_back(OrDefault(e.args.external_id, -1));
  if (step >= 0) {
    StepTable& s = trace_->steps;
    s.number.push_back(step);
    s.start.push_back(e.ts);
    s.end.push_back(e.ts + e.dur);
    s.thread.push_back(thread);
  }
  if (!on_gpu && IsCommunicationOpName(e.name)) {
    comm_spans_.push_back(
        CommSpan{thread, e.ts, e.ts + e.dur, Kept(e.name), Kept(e.args.collective)});
  }
}

int8_t TraceBuilder::KernelClassOf(NameId name) {
  if (name >= nccl_kernel_name_.size()) nccl_kernel_name_.resize(trace_->strings.size(), -1);
  int8_t& cached = nccl_kernel_name_[name];
  if (cached < 0) cached = IsNcclKernelName(trace_->strings.Get(name)) ? 1 : 0;
  return cached;
}

int8_t TraceBuilder::HostCategoryOf(NameId name, HostSpanCategory by_category) {
  std::vector<int8_t>& cache = host_category_by_name_[static_cast<int>(by_category)];
  if (name >= cache.size()) cache.resize(trace_->strings.size(), -1);
  int8_t& cached = cache[name];
  if (cached < 0) {
    cached = static_cast<int8_t>(ClassifyHostSpan(trace_->strings.Get(name), by_category));
  }
  return cached;
}

// Kineto's allocator events: CPU (-1) and CUDA devices; other device types and events without a
// time or a size are skipped (counted).
void TraceBuilder::AddMemoryEvent(const RawEvent& e, ImportStats* stats) {
  const RawArgs& a = e.args;
  const bool cpu = a.memory_device_type == 0;
  constexpr int64_t kMaxBytes = int64_t{1} << 50;  // a petabyte: past that a size is not a size
  const auto sane = [](int64_t v) { return v == kAbsent || (v >= -kMaxBytes && v <= kMaxBytes); };
  if (e.ts == kAbsent || a.memory_bytes == kAbsent || !sane(a.memory_bytes) ||
      !sane(a.total_allocated) || !sane(a.total_reserved) || (!cpu && a.memory_device_type != 1) ||
      (!cpu && (a.memory_device_id == kAbsent || a.memory_device_id < 0 ||
                a.memory_device_id > INT32_MAX))) {
    ++stats->skipped;
    return;
  }
  MemoryEventTable& m = trace_->memory_events;
  m.time.push_back(e.ts);
  m.device.push_back(cpu ? -1 : static_cast<int32_t>(a.memory_device_id));
  m.bytes.push_back(a.memory_bytes);
  m.total_allocated.push_back(
      a.total_allocated == kAbsent || a.total_allocated < 0 ? kUnknownBytes : a.total_allocated);
  m.total_reserved.push_back(
      a.total_reserved == kAbsent || a.total_reserved < 0 ? kUnknownBytes : a.total_reserved);
  m.thread.push_back(e.tid == kAbsent ? 0 : e.tid);
  ++stats->memory_events;
  ++stats->kept;
}

std::string_view TraceBuilder::Kept(std::string_view text) {
  if (text.empty()) return {};
  return *kept_.emplace(text).first;
}

RawCollectiveArgs TraceBuilder::Kept(RawCollectiveArgs args) {
  for (std::string_view* text :
       {&args.collective_name, &args.dtype, &args.group_name, &args.group_desc, &args.group_ranks,
        &args.comms_id, &args.input_type, &args.algorithm, &args.protocol, &args.communicator}) {
    *text = Kept(*text);
  }
  return args;
}

void TraceBuilder::AddMetadata(const RawEvent& e) {
  if (e.args.name.empty() || e.pid == kAbsent) return;
  if (e.name == "process_name") {
    process_names_.push_back(NamedThing{e.pid, 0, Kept(e.args.name)});
  } else if (e.name == "thread_name" && e.tid != kAbsent) {
    thread_names_.push_back(NamedThing{e.pid, e.tid, Kept(e.args.name)});
  }
}

void TraceBuilder::NoteHostPid(int64_t pid) {
  if (host_pid_ == kAbsent && pid != kAbsent) host_pid_ = pid;
}

void TraceBuilder::Finish() {
  WorkerInfo& info = trace_->info;
  if (info.pid == 0 && host_pid_ != kAbsent) info.pid = host_pid_;
  if (info.process_name.empty()) {
    for (const NamedThing& p : process_names_) {
      if (p.pid == info.pid) {
        info.process_name = std::string(p.name);
        break;
      }
    }
  }
  if (info.tracks.empty()) {
    for (const NamedThing& t : thread_names_) {
      if (t.pid != info.pid) continue;
      const bool seen = std::any_of(info.tracks.begin(), info.tracks.end(),
                                    [&t](const TrackName& n) { return n.id == t.tid; });
      if (!seen) {
        info.tracks.push_back(TrackName{t.tid, false, std::string(StripWhitespace(t.name))});
      }
    }
  }
  LinkCollectives();
  trace_->SortByTime();
}

int32_t TraceBuilder::RankInGroup(const RawCollectiveArgs& args) {
  WorkerInfo& info = trace_->info;
  if (args.group_ranks.empty()) return info.rank;
  std::vector<int32_t> ranks = ParseRankList(args.group_ranks);
  const std::string group_name(args.group_name);
  const bool known =
      std::any_of(info.process_groups.begin(), info.process_groups.end(),
                  [&group_name](const ProcessGroupInfo& g) { return g.name == group_name; });
  if (!known && !group_name.empty()) {
    info.process_groups.push_back(
        ProcessGroupInfo{group_name, std::string(args.group_desc), ranks});
  }
  auto it = std::find(ranks.begin(), ranks.end(), info.rank);
  return it == ranks.end() ? info.rank : static_cast<int32_t>(it - ranks.begin());
}

void TraceBuilder::LinkCollectives() {
  if (comm_kernels_.empty()) return;
  const KernelTable& k = trace_->kernels;
  const RuntimeCallTable& rt = trace_->runtime_calls;

  // Launch call of each communication kernel, by correlation id.
  absl::flat_hash_map<int64_t, size_t> launch_of;
  for (const CommKernel& ck : comm_kernels_) {
    if (k.correlation[ck.row] >= 0) launch_of.emplace(k.correlation[ck.row], SIZE_MAX);
  }
  for (size_t i = 0; i < rt.size(); ++i) {
    auto it = launch_of.find(rt.correlation[i]);
    if (it != launch_of.end() && it->second == SIZE_MAX) it->second = i;
  }
  // Communication ops per thread, by start, to find the ops enclosing a launch.
  std::stable_sort(comm_spans_.begin(), comm_spans_.end(),
                   [](const CommSpan& a, const CommSpan& b) {
                     return a.thread != b.thread ? a.thread < b.thread : a.start < b.start;
                   });

  CollectiveTable& c = trace_->collectives;
  for (const CommKernel& ck : comm_kernels_) {
    const size_t row = ck.row;
    RawCollectiveArgs args = ck.args;
    TimeNs enqueue = k.start[row];
    auto launch = launch_of.find(k.correlation[row]);
    if (launch != launch_of.end() && launch->second != SIZE_MAX) {
      const size_t call = launch->second;
      enqueue = rt.start[call];
      const int64_t thread = rt.thread[call];
      // Innermost enclosing ops first: walk back from the last op starting at or before the
      // launch; nesting is shallow, so a few steps suffice.
      auto first_after = std::upper_bound(
          comm_spans_.begin(), comm_spans_.end(), std::make_pair(thread, enqueue),
          [](const std::pair<int64_t, TimeNs>& key, const CommSpan& s) {
            return key.first != s.thread ? key.first < s.thread : key.second < s.start;
          });
      int visited = 0;
      for (auto it = first_after; it != comm_spans_.begin() && visited < 8; ++visited) {
        --it;
        if (it->thread != thread) break;
        if (it->end < enqueue) continue;
        MergeMissing(it->args, &args);
        if (args.collective_name.empty() && it->name.starts_with("nccl:")) {
          args.collective_name = it->name;
        }
      }
    }
    const NcclKernelInfo from_kernel = ParseNcclKernelName(trace_->strings.Get(k.name[row]));
    CollectiveOp op = args.collective_name.empty() ? CollectiveOp::kUnknown
                                                   : CollectiveOpFromName(args.collective_name);
    if (op == CollectiveOp::kUnknown) op = from_kernel.op;

    const std::string_view dtype = !args.dtype.empty() ? args.dtype : args.input_type;
    int64_t count = std::max(args.in_nelems, args.out_nelems);
    if (count == kAbsent) count = args.input_elements;
    const int64_t bytes = count == kAbsent ? 0 : count * DtypeSize(dtype);

    std::string communicator;
    if (!args.communicator.empty()) {
      communicator = std::string(args.communicator);
    } else if (!args.group_name.empty()) {
      communicator = StrCat("pg:", args.group_name);
    } else if (!args.comms_id.empty()) {
      communicator = StrCat("comm:", args.comms_id);
    } else {
      // Without process group names, PyTorch runs each communicator on its own stream, and
      // every rank of a job numbers its streams alike (the device differs: one per rank).
      communicator = StrCat("stream:", k.stream[row]);
    }
    const int32_t nranks = static_cast<int32_t>(
        args.group_size != kAbsent  ? args.group_size
        : !args.group_ranks.empty() ? static_cast<int64_t>(ParseRankList(args.group_ranks).size())
                                    : trace_->info.world_size);

    c.communicator.push_back(trace_->strings.Intern(communicator));
    c.rank.push_back(RankInGroup(args));
    c.nranks.push_back(nranks);
    c.op.push_back(op);
    c.sequence.push_back(args.seq == kAbsent ? kUnknownSequence : args.seq);
    c.count.push_back(count == kAbsent ? 0 : count);
    c.dtype.push_back(trace_->strings.Intern(dtype));
    c.bytes.push_back(bytes);
    c.algorithm.push_back(
        trace_->strings.Intern(!args.algorithm.empty() ? args.algorithm : from_kernel.algorithm));
    c.protocol.push_back(
        trace_->strings.Intern(!args.protocol.empty() ? args.protocol : from_kernel.protocol));
    // NCCL launches one block per channel.
    c.channels.push_back(static_cast<int32_t>(
        args.channels != kAbsent ? args.channels : static_cast<int64_t>(k.grid_x[row])));
    c.enqueue.push_back(enqueue);
    c.kernel_start.push_back(k.start[row]);
    c.kernel_end.push_back(k.end[row]);
    c.correlation.push_back(k.correlation[row]);
  }
}

}  // namespace podscope::common
