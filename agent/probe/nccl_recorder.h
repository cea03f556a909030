// NCCL collectives, as NCCL's profiler plugin reports them (common/worker_trace.h): one row per
// collective or point-to-point call of this rank, with its communicator, sequence number,
// size, algorithm, protocol and channels, the host time it was enqueued, and the GPU time its
// kernel ran (the earliest channel start to the latest channel stop, from KernelCh events).
//
// Version-independent: nccl_plugin.cc adapts the v6, v5 and v4 entry points onto these calls.
//
// A kernel-channel timestamp that cannot be true is dropped and counted, never used: a start or
// stop more than kChannelSlackNs before its collective was enqueued or after NCCL reported it
// (both on the host clock, through the window's GPU clock map, once it holds a pair), or a stop
// before the collective's first start. NCCL before 2.30 can hand a channel another task's timer
// (seconds off; its broadcast-as-AllGatherV path), and one such value would stretch a collective's
// kernel over the whole window.
// NCCL calls in from the training thread (collectives) and from its proxy thread (kernel
// channels); everything here takes one short mutex and never allocates outside a window.
//
// Handles are numbers, not pointers: (window generation, row) packed into the void* NCCL
// keeps. An event that stops after its window closed (or after the rows were harvested) finds a
// stale generation and is ignored; nothing NCCL holds can ever dangle.
//
// Watch mode (docs/watch.md): between windows NCCL is asked only for collectives and their kernel
// channels (kWatchMask), and each collective takes a slot of a fixed ring (a serial number is
// its handle; a slot reused before it was taken is counted as dropped). Inside a window a
// collective has both a window row and a watch slot. Each communicator also keeps where this
// rank stands in it (the last collective entered and completed), for hang detection.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/probe/event_source.h"

namespace podscope::agent::probe {

// What the rows of one communicator share (NCCL's per-communicator plugin context).
struct NcclCommunicator {
  uint64_t comm_id = 0;  // the same on every rank of the communicator
  std::string name;      // the user's name for it, may be empty
  int nranks = 0;
  int rank = 0;
  int* activation_mask = nullptr;  // NCCL's; written only under the recorder's mutex
  bool finalized = false;
  // Watch progress (host clock).
  int64_t entered_sequence = -1;
  TimeNs entered_ns = 0;
  common::CollectiveOp entered_op = common::CollectiveOp::kUnknown;
  int64_t entered_bytes = 0;
  int64_t completed_sequence = -1;
  TimeNs completed_ns = 0;
};

struct NcclCollectiveStart {
  uint64_t sequence = 0;
  bool has_sequence = true;  // point-to-point calls have none
  const char* func = nullptr;
  uint64_t count = 0;
  const char* datatype = nullptr;
  int channels = 0;
  const char* algorithm = nullptr;
  const char* protocol = nullptr;
  int peer = -1;  // send / recv
};

class NcclRecorder : public EventSource, public WatchSource {
 public:
  // The events the probe asks NCCL for inside a window, and between windows when watching.
  static constexpr int kWindowMask = (1 << 1) | (1 << 2) | (1 << 6);  // Coll | P2p | KernelCh
  static constexpr int kWatchMask = (1 << 1) | (1 << 6);              // Coll | KernelCh
  // Collectives between two watch flushes (a second): past this, the oldest are dropped.
  static constexpr size_t kWatchRingSlots = 8192;
  // A communicator with nothing entered or completed for this long reports its progress.
  static constexpr TimeNs kQuietNs = 1'000'000'000;
  // How far a kernel-channel timestamp may fall outside its collective's host span before it is
  // taken for a wrong one: far more than the GPU clock map's error (an offset read at the window's
  // start, drifting tens of microseconds a second), far less than the seconds a wrong timer is off.
  static constexpr TimeNs kChannelSlackNs = 100'000'000;

  explicit NcclRecorder(TimeNs (*host_now)() = nullptr);

  // WatchSource.
  void SetWatching(bool on) override;
  void TakeWatch(TimeNs now, const GpuClockMap& gpu_clock, WatchHarvest* out) override;

  std::string_view name() const override { return "nccl"; }
  void OpenWindow(TimeNs host_now, EventBudget* budget, GpuClockMap* gpu_clock) override;
  void CloseWindow(TimeNs host_now) override;
  Harvest TakeHarvest() override;

  // NCCL's calls. A null return means "not recorded"; NCCL passes it back and it is ignored.
  NcclCommunicator* InitCommunicator(uint64_t comm_id, const char* name, int nranks, int rank,
                                     int* activation_mask);
  void FinalizeCommunicator(NcclCommunicator* comm);
  void* StartCollective(NcclCommunicator* comm, const NcclCollectiveStart& start);
  void* StartKernelChannel(void* parent, uint64_t gpu_start_ns);
  void StopKernelChannel(void* handle, uint64_t gpu_stop_ns);

  size_t communicators() const;
  // Kernel-channel timestamps dropped as impossible, since the recorder was made.
  uint64_t bad_channel_times() const;

 private:
  struct WatchSlot {
    uint64_t serial = 0;  // 0: never used
    bool taken = false;
    NcclCommunicator* comm = nullptr;
    int64_t sequence = 0;
    common::CollectiveOp op = common::CollectiveOp::kUnknown;
    int64_t bytes = 0;
    int channels = 0;  // what NCCL announced
    int started = 0;   // kernel channels started and stopped
    int stopped = 0;
    TimeNs enqueue_ns = 0;
    TimeNs stopped_ns = 0;  // host time of the last channel stop
    uint64_t gpu_start = 0;
    uint64_t gpu_end = 0;
  };
  struct Row {
    const NcclCommunicator* comm = nullptr;
    uint64_t watch_serial = 0;  // its watch slot, 0: none
    int64_t sequence = -1;
    std::string func, datatype, algorithm, protocol;
    int64_t count = 0;
    int channels = 0;
    int peer = -1;
    TimeNs enqueue_ns = 0;
    uint64_t gpu_start = 0;  // 0: no channel started yet
    uint64_t gpu_end = 0;
  };
  // The row a handle names, or null when stale.
  Row* RowOf(void* handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The watch slot of a serial, or null when it was reused.
  WatchSlot* SlotOf(uint64_t serial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t AddWatchSlot(NcclCommunicator* comm, const NcclCollectiveStart& start, TimeNs now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ChannelStarted(WatchSlot* slot, uint64_t gpu_start_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ChannelStopped(WatchSlot* slot, uint64_t gpu_stop_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int MaskNow() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a channel's GPU time can belong to a collective enqueued at `enqueue_ns` and
  // reported at `now` (host clock). Counts the ones that cannot.
  bool PlausibleChannelTime(uint64_t gpu_ns, TimeNs enqueue_ns, TimeNs now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  TimeNs (*host_now_)();
  mutable absl::Mutex mu_;
  std::deque<NcclCommunicator> comms_
      ABSL_GUARDED_BY(mu_);  // deque: contexts handed to NCCL keep their address
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t generation_ ABSL_GUARDED_BY(mu_) = 1;
  EventBudget* budget_ ABSL_GUARDED_BY(mu_) = nullptr;
  GpuClockMap* gpu_clock_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<Row> rows_ ABSL_GUARDED_BY(mu_);
  bool watching_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<WatchSlot> ring_ ABSL_GUARDED_BY(mu_);  // kWatchRingSlots once watching started
  uint64_t next_serial_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t oldest_serial_ ABSL_GUARDED_BY(mu_) = 1;  // the oldest slot not taken yet
  uint64_t watch_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bad_channel_times_ ABSL_GUARDED_BY(mu_) = 0;  // since the recorder was made
  uint64_t window_bad_channel_times_ ABSL_GUARDED_BY(mu_) =
      0;  // this window's, reported with its harvest
};

}  // namespace podscope::agent::probe
