#include "agent/probe/nccl_recorder.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

namespace podscope::agent::probe {

namespace {

// NCCL's function names (ncclFuncToString) onto the trace model's ops.
common::CollectiveOp OpOfFunc(std::string_view func) {
  using common::CollectiveOp;
  static constexpr std::pair<std::string_view, CollectiveOp> kOps[] = {
      {"AllReduce", CollectiveOp::kAllReduce},
      {"AllGather", CollectiveOp::kAllGather},
      {"ReduceScatter", CollectiveOp::kReduceScatter},
      {"Broadcast", CollectiveOp::kBroadcast},
      {"Reduce", CollectiveOp::kReduce},
      {"AllToAll", CollectiveOp::kAllToAll},
      {"AlltoAll", CollectiveOp::kAllToAll},
      {"Send", CollectiveOp::kSend},
      {"Recv", CollectiveOp::kRecv},
      {"SendRecv", CollectiveOp::kSendRecv},
  };
  for (const auto& [name, op] : kOps) {
    if (func == name) return op;
  }
  return CollectiveOp::kUnknown;
}

// Bytes per element of NCCL's datatype names (ncclDatatypeToString); 0 when unknown.
int DatatypeBytes(std::string_view dtype) {
  static constexpr std::pair<std::string_view, int> kSizes[] = {
      {"ncclInt8", 1},    {"ncclUint8", 1},    {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
      {"ncclFloat16", 2}, {"ncclBfloat16", 2}, {"ncclInt32", 4},      {"ncclUint32", 4},
      {"ncclFloat32", 4}, {"ncclInt64", 8},    {"ncclUint64", 8},     {"ncclFloat64", 8},
  };
  for (const auto& [name, size] : kSizes) {
    if (dtype == name) return size;
  }
  return 0;
}

// A handle: bit 63 marks a kernel channel, bit 62 a watch slot (the rest is its serial);
// otherwise bits 32-61 hold the window generation and bits 0-31 the row + 1.
constexpr uint64_t kChannelBit = uint64_t{1} << 63;
constexpr uint64_t kWatchBit = uint64_t{1} << 62;
constexpr uint32_t kGenerationMask = 0x3fffffffu;

void* PackHandle(uint32_t generation, size_t row, bool channel) {
  const uint64_t bits = (static_cast<uint64_t>(generation & kGenerationMask) << 32) |
                        (static_cast<uint64_t>(row) + 1);
  return reinterpret_cast<void*>(static_cast<uintptr_t>(channel ? bits | kChannelBit : bits));
}

void* WatchHandle(uint64_t serial) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(serial | kWatchBit));
}

uint64_t BitsOf(void* handle) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)); }

std::string_view OrEmpty(const char* s) {
  return s == nullptr ? std::string_view() : std::string_view(s);
}

}  // namespace

NcclRecorder::NcclRecorder(TimeNs (*host_now)())
    : host_now_(host_now != nullptr ? host_now : &common::HostNowNs) {}

NcclCommunicator* NcclRecorder::InitCommunicator(uint64_t comm_id, const char* name, int nranks,
                                                 int rank, int* activation_mask) {
  absl::MutexLock lock(&mu_);
  NcclCommunicator& comm = comms_.emplace_back();
  comm.comm_id = comm_id;
  comm.name = OrEmpty(name);
  comm.nranks = nranks;
  comm.rank = rank;
  comm.activation_mask = activation_mask;
  // A communicator made while a window is open (or while watching) records from the start.
  if (activation_mask != nullptr) *activation_mask = MaskNow();
  return &comm;
}

void NcclRecorder::FinalizeCommunicator(NcclCommunicator* comm) {
  if (comm == nullptr) return;
  absl::MutexLock lock(&mu_);
  // The entry stays (rows of this window may point at it); only NCCL's mask goes away.
  comm->finalized = true;
  comm->activation_mask = nullptr;
}

size_t NcclRecorder::communicators() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const NcclCommunicator& c : comms_) n += c.finalized ? 0 : 1;
  return n;
}

void NcclRecorder::OpenWindow(TimeNs host_now, EventBudget* budget, GpuClockMap* gpu_clock) {
  absl::MutexLock lock(&mu_);
  ++generation_;
  open_ = true;
  budget_ = budget;
  gpu_clock_ = gpu_clock;
  rows_.clear();
  window_bad_channel_times_ = 0;
  rows_.reserve(4096);
  for (NcclCommunicator& c : comms_) {
    if (c.activation_mask != nullptr) *c.activation_mask = kWindowMask;
  }
}

int NcclRecorder::MaskNow() const { return open_ ? kWindowMask : watching_ ? kWatchMask : 0; }

void NcclRecorder::SetWatching(bool on) {
  absl::MutexLock lock(&mu_);
  if (on && ring_.empty()) ring_.resize(kWatchRingSlots);  // once, off every training thread
  watching_ = on;
  for (NcclCommunicator& c : comms_) {
    if (c.activation_mask != nullptr) *c.activation_mask = MaskNow();
  }
}

void NcclRecorder::CloseWindow(TimeNs host_now) {
  absl::MutexLock lock(&mu_);
  open_ = false;
  // Kernel channels still running keep reporting into their rows until the harvest; new
  // collectives are asked for only as watch data.
  for (NcclCommunicator& c : comms_) {
    if (c.activation_mask != nullptr) *c.activation_mask = MaskNow();
  }
}

void* NcclRecorder::StartCollective(NcclCommunicator* comm, const NcclCollectiveStart& start) {
  if (comm == nullptr) return nullptr;
  const TimeNs now = host_now_();
  absl::MutexLock lock(&mu_);
  const uint64_t watch_serial =
      watching_ && start.has_sequence ? AddWatchSlot(comm, start, now) : 0;
  if (!open_ || budget_ == nullptr || !budget_->Take())
    return watch_serial != 0 ? WatchHandle(watch_serial) : nullptr;
  Row& row = rows_.emplace_back();
  row.comm = comm;
  row.watch_serial = watch_serial;
  row.sequence =
      start.has_sequence ? static_cast<int64_t>(start.sequence) : common::kUnknownSequence;
  row.func = OrEmpty(start.func);
  row.datatype = OrEmpty(start.datatype);
  row.algorithm = OrEmpty(start.algorithm);
  row.protocol = OrEmpty(start.protocol);
  row.count = static_cast<int64_t>(start.count);
  row.channels = start.channels;
  row.peer = start.peer;
  row.enqueue_ns = now;
  return PackHandle(generation_, rows_.size() - 1, false);
}

uint64_t NcclRecorder::AddWatchSlot(NcclCommunicator* comm, const NcclCollectiveStart& start,
                                    TimeNs now) {
  const uint64_t serial = next_serial_++;
  WatchSlot& slot = ring_[serial % ring_.size()];
  if (slot.serial != 0 && !slot.taken) ++watch_dropped_;  // overrun: the flush fell behind
  slot = WatchSlot{};
  slot.serial = serial;
  slot.comm = comm;
  slot.sequence = static_cast<int64_t>(start.sequence);
  slot.op = OpOfFunc(OrEmpty(start.func));
  slot.bytes = static_cast<int64_t>(start.count) * DatatypeBytes(OrEmpty(start.datatype));
  slot.channels = start.channels;
  slot.enqueue_ns = now;
  comm->entered_sequence = slot.sequence;
  comm->entered_ns = now;
  comm->entered_op = slot.op;
  comm->entered_bytes = slot.bytes;
  return serial;
}

NcclRecorder::WatchSlot* NcclRecorder::SlotOf(uint64_t serial) {
  if (serial == 0 || ring_.empty()) return nullptr;
  WatchSlot& slot = ring_[serial % ring_.size()];
  return slot.serial == serial ? &slot : nullptr;
}

void NcclRecorder::ChannelStarted(WatchSlot* slot, uint64_t gpu_start_ns) {
  if (slot == nullptr) return;
  ++slot->started;
  if (gpu_start_ns != 0 && (slot->gpu_start == 0 || gpu_start_ns < slot->gpu_start))
    slot->gpu_start = gpu_start_ns;
}

void NcclRecorder::ChannelStopped(WatchSlot* slot, uint64_t gpu_stop_ns) {
  if (slot == nullptr) return;
  ++slot->stopped;
  if (gpu_stop_ns != 0 && slot->gpu_start != 0 && gpu_stop_ns < slot->gpu_start) {
    ++bad_channel_times_;  // ends before the collective began (a window row counted it already)
    gpu_stop_ns = 0;
  }
  slot->gpu_end = std::max(slot->gpu_end, gpu_stop_ns);
  // The clock is read only for the stop that may finish the collective (a clock read is a good
  // part of a channel's cost).
  if (slot->stopped < slot->started) return;
  const TimeNs now = host_now_();
  slot->stopped_ns = now;
  // The collective completed once every channel it announced has stopped.
  if (slot->stopped >= slot->channels && slot->sequence > slot->comm->completed_sequence) {
    slot->comm->completed_sequence = slot->sequence;
    slot->comm->completed_ns = now;
  }
}

bool NcclRecorder::PlausibleChannelTime(uint64_t gpu_ns, TimeNs enqueue_ns, TimeNs now) {
  // Without a clock pair (outside a window, or before CUPTI read one) there is nothing to hold
  // the GPU's time against the host's.
  if (gpu_clock_ == nullptr || gpu_ns == 0) return true;
  const std::optional<TimeNs> host = gpu_clock_->ToHostIfKnown(gpu_ns);
  if (!host || (*host >= enqueue_ns - kChannelSlackNs && *host <= now + kChannelSlackNs))
    return true;
  ++bad_channel_times_;
  ++window_bad_channel_times_;
  return false;
}

uint64_t NcclRecorder::bad_channel_times() const {
  absl::MutexLock lock(&mu_);
  return bad_channel_times_;
}

NcclRecorder::Row* NcclRecorder::RowOf(void* handle) {
  const uint64_t bits = BitsOf(handle);
  if (bits == 0 || (bits & kWatchBit) != 0) return nullptr;
  const uint32_t generation = static_cast<uint32_t>((bits & ~kChannelBit) >> 32);
  const uint64_t row = (bits & 0xffffffffu);
  if (generation != (generation_ & kGenerationMask) || row == 0 || row > rows_.size())
    return nullptr;
  return &rows_[row - 1];
}

void* NcclRecorder::StartKernelChannel(void* parent, uint64_t gpu_start_ns) {
  const uint64_t bits = BitsOf(parent);
  absl::MutexLock lock(&mu_);
  if ((bits & kWatchBit) != 0) {
    WatchSlot* slot = SlotOf(bits & ~(kWatchBit | kChannelBit));
    if (slot == nullptr) return nullptr;
    ChannelStarted(slot, gpu_start_ns);
    return reinterpret_cast<void*>(static_cast<uintptr_t>(bits | kChannelBit));
  }
  Row* row = RowOf(parent);
  if (row == nullptr) return nullptr;
  // A wrong start is left out of the row and its watch slot alike; the channel's stop still counts.
  const uint64_t start =
      PlausibleChannelTime(gpu_start_ns, row->enqueue_ns, host_now_()) ? gpu_start_ns : 0;
  if (start != 0 && (row->gpu_start == 0 || start < row->gpu_start)) row->gpu_start = start;
  ChannelStarted(SlotOf(row->watch_serial), start);
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(parent) | kChannelBit);
}

void NcclRecorder::StopKernelChannel(void* handle, uint64_t gpu_stop_ns) {
  const uint64_t bits = BitsOf(handle);
  if ((bits & kChannelBit) == 0) return;
  absl::MutexLock lock(&mu_);
  if ((bits & kWatchBit) != 0) {
    ChannelStopped(SlotOf(bits & ~(kWatchBit | kChannelBit)), gpu_stop_ns);
    return;
  }
  Row* row = RowOf(handle);
  if (row == nullptr) return;
  uint64_t stop = gpu_stop_ns;
  if (!PlausibleChannelTime(stop, row->enqueue_ns, host_now_())) {
    stop = 0;
  } else if (row->gpu_start != 0 && stop < row->gpu_start) {  // ends before the collective began
    ++bad_channel_times_;
    ++window_bad_channel_times_;
    stop = 0;
  }
  row->gpu_end = std::max(row->gpu_end, stop);
  ChannelStopped(SlotOf(row->watch_serial), stop);
}

void NcclRecorder::TakeWatch(TimeNs now, const GpuClockMap& gpu_clock, WatchHarvest* out) {
  // A collective whose channels all stopped is finished; one that NCCL announced more channels
  // for than it reported is taken once its channels have been quiet for a while; one with no
  // kernel at all for minutes is given up (counted).
  constexpr TimeNs kSettleNs = 200'000'000;
  constexpr TimeNs kAbandonNs = 300'000'000'000;
  std::vector<WatchSlot> finished;
  {
    absl::MutexLock lock(&mu_);
    if (ring_.empty()) return;
    if (next_serial_ - oldest_serial_ > ring_.size()) oldest_serial_ = next_serial_ - ring_.size();
    for (uint64_t serial = oldest_serial_; serial < next_serial_; ++serial) {
      WatchSlot* slot = SlotOf(serial);
      if (slot == nullptr || slot->taken) continue;
      const bool all_stopped = slot->started > 0 && slot->stopped >= slot->started;
      if (all_stopped && (slot->stopped >= slot->channels || now - slot->stopped_ns >= kSettleNs)) {
        slot->taken = true;
        if (slot->sequence > slot->comm->completed_sequence) {  // fewer channels than announced
          slot->comm->completed_sequence = slot->sequence;
          slot->comm->completed_ns = slot->stopped_ns;
        }
        finished.push_back(*slot);
      } else if (slot->started == 0 && now - slot->enqueue_ns >= kAbandonNs) {
        slot->taken = true;
        ++watch_dropped_;
      }
    }
    while (oldest_serial_ < next_serial_) {
      const WatchSlot* slot = SlotOf(oldest_serial_);
      if (slot != nullptr && !slot->taken) break;
      ++oldest_serial_;
    }
    for (const NcclCommunicator& c : comms_) {
      if (c.finalized || c.entered_sequence < 0) continue;
      if (now - std::max(c.entered_ns, c.completed_ns) < kQuietNs) continue;
      common::RankProgress& p = out->progress.emplace_back();
      p.rank = -1;
      p.communicator = c.comm_id;
      p.nranks = c.nranks;
      p.entered_sequence = c.entered_sequence;
      p.entered_ns = c.entered_ns;
      p.entered_op = c.entered_op;
      p.entered_bytes = c.entered_bytes;
      p.completed_sequence = c.completed_sequence;
      p.completed_ns = c.completed_ns;
    }
    out->dropped += watch_dropped_;
  }
  out->collectives.reserve(out->collectives.size() + finished.size());
  for (const WatchSlot& slot : finished) {
    common::CollectiveArrival& a = out->collectives.emplace_back();
    a.communicator = slot.comm->comm_id;
    a.sequence = slot.sequence;
    a.op = slot.op;
    a.nranks = slot.comm->nranks;
    a.bytes = slot.bytes;
    a.enqueue_ns = slot.enqueue_ns;
    a.start_ns = gpu_clock.ToHost(slot.gpu_start);
    a.end_ns = gpu_clock.ToHost(slot.gpu_end);
  }
}

Harvest NcclRecorder::TakeHarvest() {
  std::vector<Row> rows;
  GpuClockMap* gpu_clock = nullptr;
  uint64_t bad_times = 0;
  {
    absl::MutexLock lock(&mu_);
    rows.swap(rows_);
    gpu_clock = gpu_clock_;
    ++generation_;  // late kernel-channel stops now find nothing
    bad_times = window_bad_channel_times_;
    window_bad_channel_times_ = 0;
  }
  Harvest out;
  common::WorkerTrace& t = out.trace;
  common::CollectiveTable& c = t.collectives;
  uint64_t unfinished = 0, after_window = 0;
  // The window's end, as CUPTI's records are held to it: a collective whose kernel was still
  // running when the window closed is not the window's (its kernel record is left out too).
  std::optional<TimeNs> window_end;
  if (gpu_clock != nullptr) {
    if (const std::optional<HostWindow> w = gpu_clock->Window(); w && w->last_ns != INT64_MAX)
      window_end = w->last_ns + kClockMappingSlackNs;
  }
  for (const Row& row : rows) {
    // A collective whose kernel never reported (still running at the harvest, or NCCL gave no
    // kernel events) has no device time to analyse: counted, not invented.
    if (row.gpu_start == 0 || row.gpu_end < row.gpu_start) {
      ++unfinished;
      continue;
    }
    if (window_end && gpu_clock->ToHost(row.gpu_end) > *window_end) {
      ++after_window;
      continue;
    }
    char comm_name[64];
    std::snprintf(comm_name, sizeof(comm_name), "nccl:%016llx",
                  static_cast<unsigned long long>(row.comm->comm_id));
    c.communicator.push_back(t.strings.Intern(comm_name));
    c.rank.push_back(row.comm->rank);
    c.nranks.push_back(row.comm->nranks);
    c.op.push_back(OpOfFunc(row.func));
    c.sequence.push_back(row.sequence);
    c.count.push_back(row.count);
    c.dtype.push_back(t.strings.Intern(row.datatype));
    c.bytes.push_back(row.count * DatatypeBytes(row.datatype));
    c.algorithm.push_back(t.strings.Intern(row.algorithm));
    c.protocol.push_back(t.strings.Intern(row.protocol));
    c.channels.push_back(row.channels);
    c.enqueue.push_back(row.enqueue_ns);
    c.kernel_start.push_back(gpu_clock != nullptr ? gpu_clock->ToHost(row.gpu_start)
                                                  : static_cast<TimeNs>(row.gpu_start));
    c.kernel_end.push_back(gpu_clock != nullptr ? gpu_clock->ToHost(row.gpu_end)
                                                : static_cast<TimeNs>(row.gpu_end));
    c.correlation.push_back(-1);  // NCCL does not say which kernel record is this call's
  }
  // Collectives without device time, and kernel-channel timestamps that could not be true.
  out.dropped = unfinished + bad_times + after_window;
  for (const auto& [reason, n] : {std::pair{"collectives: no device time", unfinished},
                                  std::pair{"collective channels: times not true", bad_times},
                                  std::pair{"collectives: after the window", after_window}}) {
    if (n > 0) out.dropped_reasons[reason] = n;
  }
  return out;
}

}  // namespace podscope::agent::probe
