// The canonical trace model (docs/life-of-a-capture.md): one struct-of-arrays table per event kind.
// Every table lists its columns once in ForEachColumn, which sorting, size checks and
// memory accounting use, so adding a column is a one-line change there.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/string_table.h"
#include "common/time_types.h"

namespace podscope::common {

// What a device kernel does. Memsets are kept with copies (MemcpyKind::kMemset) because they
// carry a byte count like copies do; kSync marks CUDA synchronisation records (cuda_sync).
enum class KernelClass : uint8_t { kCompute = 0, kCommunication = 1, kSync = 2 };
inline constexpr int kKernelClassCount = 3;

enum class MemcpyKind : uint8_t {
  kUnknown = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3,
  kPeerToPeer = 4,
  kHostToHost = 5,
  kMemset = 6,
};
inline constexpr int kMemcpyKindCount = 7;

enum class ApiKind : uint8_t { kRuntime = 0, kDriver = 1 };
inline constexpr int kApiKindCount = 2;

// Host span categories; input and optimizer are recognised from names whatever the source.
enum class HostSpanCategory : uint8_t {
  kOp = 0,             // framework operator (Kineto cpu_op)
  kAnnotation = 1,     // user annotation / NVTX range (incl. ProfilerStep#N)
  kInput = 2,          // dataloader / input pipeline
  kOptimizer = 3,      // optimizer step / zero_grad
  kPython = 4,         // python function
  kGpuAnnotation = 5,  // annotation recorded on a GPU stream; `thread` holds the stream
};
inline constexpr int kHostSpanCategoryCount = 6;

enum class CollectiveOp : uint8_t {
  kUnknown = 0,
  kAllReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kBroadcast = 4,
  kReduce = 5,
  kAllToAll = 6,
  kSend = 7,
  kRecv = 8,
  kSendRecv = 9,  // NCCL's fused send/recv kernel when the caller's op is unknown
  kBarrier = 10,
};
inline constexpr int kCollectiveOpCount = 11;

std::string_view KernelClassName(KernelClass c);
std::string_view MemcpyKindName(MemcpyKind k);
std::string_view HostSpanCategoryName(HostSpanCategory c);
std::string_view CollectiveOpName(CollectiveOp op);

// Device kernels (and CUDA sync records).
struct KernelTable {
  std::vector<TimeNs> start, end;
  std::vector<int32_t> device, stream;
  std::vector<NameId> name;
  std::vector<int64_t> correlation;
  std::vector<uint32_t> grid_x, grid_y, grid_z, block_x, block_y, block_z;
  std::vector<int32_t> registers_per_thread, shared_memory_bytes;
  std::vector<KernelClass> kernel_class;

  size_t size() const { return start.size(); }
  // Visits every column (a std::vector) in a fixed order; const and non-const.
  template <typename F>
  void ForEachColumn(F&& f) {
    Columns(*this, f);
  }
  template <typename F>
  void ForEachColumn(F&& f) const {
    Columns(*this, f);
  }
  template <typename Self, typename F>
  static void Columns(Self& t, F& f) {
    f(t.start), f(t.end), f(t.device), f(t.stream), f(t.name), f(t.correlation), f(t.grid_x),
        f(t.grid_y), f(t.grid_z), f(t.block_x), f(t.block_y), f(t.block_z),
        f(t.registers_per_thread), f(t.shared_memory_bytes), f(t.kernel_class);
  }
};

// Copies and memsets.
struct MemcpyTable {
  std::vector<TimeNs> start, end;
  std::vector<int32_t> device, stream;
  std::vector<NameId> name;  // the source's label, e.g. "Memcpy HtoD (Pinned -> Device)"
  std::vector<int64_t> bytes;
  std::vector<int64_t> correlation;
  std::vector<MemcpyKind> kind;

  size_t size() const { return start.size(); }
  // Visits every column (a std::vector) in a fixed order; const and non-const.
  template <typename F>
  void ForEachColumn(F&& f) {
    Columns(*this, f);
  }
  template <typename F>
  void ForEachColumn(F&& f) const {
    Columns(*this, f);
  }
  template <typename Self, typename F>
  static void Columns(Self& t, F& f) {
    f(t.start), f(t.end), f(t.device), f(t.stream), f(t.name), f(t.bytes), f(t.correlation),
        f(t.kind);
  }
};

// CUDA runtime and driver API calls on host threads.
struct RuntimeCallTable {
  std::vector<TimeNs> start, end;
  std::vector<int64_t> thread;
  std::vector<NameId> name;
  std::vector<int64_t> correlation;
  std::vector<int64_t> external_id;
  std::vector<ApiKind> api_kind;

  size_t size() const { return start.size(); }
  // Visits every column (a std::vector) in a fixed order; const and non-const.
  template <typename F>
  void ForEachColumn(F&& f) {
    Columns(*this, f);
  }
  template <typename F>
  void ForEachColumn(F&& f) const {
    Columns(*this, f);
  }
  template <typename Self, typename F>
  static void Columns(Self& t, F& f) {
    f(t.start), f(t.end), f(t.thread), f(t.name), f(t.correlation), f(t.external_id), f(t.api_kind);
  }
};

inline constexpr int64_t kNoStep = -1;

// Host-side spans: operators, annotations, input, optimizer, python.
struct HostSpanTable {
  std::vector<TimeNs> start, end;
  std::vector<int64_t> thread;
  std::vector<NameId> name;
  std::vector<HostSpanCategory> category;
  std::vector<int64_t> step;  // kNoStep unless the span is a step marker
  std::vector<int64_t> external_id;

  size_t size() const { return start.size(); }
  // Visits every column (a std::vector) in a fixed order; const and non-const.
  template <typename F>
  void ForEachColumn(F&& f) {
    Columns(*this, f);
  }
  template <typename F>
  void ForEachColumn(F&& f) const {
    Columns(*this, f);
  }
  template <typename Self, typename F>
  static void Columns(Self& t, F& f) {
    f(t.start), f(t.end), f(t.thread), f(t.name), f(t.category), f(t.step), f(t.external_id);
  }
};

inline constexpr int64_t kUnknownSequence = -1;

// Collective operations (NCCL). One row per rank-local collective call.
struct CollectiveTable {
  std::vector<NameId> communicator;  // communicator / process group identity
  std::vector<int32_t> rank, nranks;
  std::vector<CollectiveOp> op;
  std::vector<int64_t> sequence;  // kUnknownSequence when the source has none
  std::vector<int64_t> count;     // elements
  std::vector<NameId> dtype;
  std::vector<int64_t> bytes;
  std::vector<NameId> algorithm, protocol;
  std::vector<int32_t> channels;
  std::vector<TimeNs> enqueue, kernel_start, kernel_end;
  std::vector<int64_t> correlation;  // links to the kernel row, when known

  size_t size() const { return enqueue.size(); }
  // Visits every column (a std::vector) in a fixed order; const and non-const.
  template <typename F>
  void ForEachColumn(F&& f) {
    Columns(*this, f);
  }
  template <typename F>
  void ForEachColumn(F&& f) const {
    Columns(*this, f);
  }
  template <typename Self, typename F>
  static void Columns(Self& t, F& f) {
    f(t.communicator), f(t.rank), f(t.nranks), f(t.op), f(t.sequence), f(t.count), f(t.dtype),
        f(t.bytes), f(t.algorithm), f(t.protocol), f(t.channels), f(t.enqueue), f(t.kernel_start),
        f(t.kernel_end), f(t.correlation);
  }
};

// Training steps as marked on the host (device span is derived by analysis).
struct StepTable {
  std::vector<int64_t> number;
  std::vector<TimeNs> start, end;
  std::vector<int64_t> thread;

  size_t size() const { return start.size(); }
  // Visits every column (a std::vector) in a fixed order; const and non-const.
  template <typename F>
  void ForEachColumn(F&& f) {
    Columns(*this, f);
  }
  template <typename F>
  void ForEachColumn(F&& f) const {
    Columns(*this, f);
  }
  template <typename Self, typename F>
  static void Columns(Self& t, F& f) {
    f(t.number), f(t.start), f(t.end), f(t.thread);
  }
};

// Periodic host and GPU health samples, for root-causing stragglers.
struct HostSampleTable {
  std::vector<TimeNs> time;
  std::vector<float> cpu_percent;          // the whole node, 0..100
  std::vector<float> process_cpu_percent;  // the worker's own process (100 = one core); -1: unknown
  std::vector<int64_t> memory_used_bytes, net_rx_bytes, net_tx_bytes;
  std::vector<int32_t> gpu_sm_clock_mhz, gpu_power_mw, gpu_temperature_c;
  std::vector<uint64_t> gpu_throttle_reasons;

  size_t size() const { return time.size(); }
  // Visits every column (a std::vector) in a fixed order; const and non-const.
  template <typename F>
  void ForEachColumn(F&& f) {
    Columns(*this, f);
  }
  template <typename F>
  void ForEachColumn(F&& f) const {
    Columns(*this, f);
  }
  template <typename Self, typename F>
  static void Columns(Self& t, F& f) {
    f(t.time), f(t.cpu_percent), f(t.process_cpu_percent), f(t.memory_used_bytes),
        f(t.net_rx_bytes), f(t.net_tx_bytes), f(t.gpu_sm_clock_mhz), f(t.gpu_power_mw),
        f(t.gpu_temperature_c), f(t.gpu_throttle_reasons);
  }
};

// The allocator's events (Kineto's `[memory]` instants; the probe's device memory samples):
// one row per allocation (bytes > 0) or free (bytes < 0), or a sample (bytes 0), with the
// allocator's totals after it. Device -1 is the host.
inline constexpr int64_t kUnknownBytes = -1;
struct MemoryEventTable {
  std::vector<TimeNs> time;
  std::vector<int32_t> device;
  std::vector<int64_t> bytes;
  std::vector<int64_t> total_allocated, total_reserved;  // kUnknownBytes when not given
  std::vector<int64_t> thread;

  size_t size() const { return time.size(); }
  // Visits every column (a std::vector) in a fixed order; const and non-const.
  template <typename F>
  void ForEachColumn(F&& f) {
    Columns(*this, f);
  }
  template <typename F>
  void ForEachColumn(F&& f) const {
    Columns(*this, f);
  }
  template <typename Self, typename F>
  static void Columns(Self& t, F& f) {
    f(t.time), f(t.device), f(t.bytes), f(t.total_allocated), f(t.total_reserved), f(t.thread);
  }
};

}  // namespace podscope::common
