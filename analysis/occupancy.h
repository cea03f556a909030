// How many blocks of a kernel one SM holds, from its launch shape and the device's limits (the
// CUDA occupancy rules, compute capability 7.0 to 12.x), and the PyTorch profiler's estimates
// built on it: blocks per SM and Est. Achieved Occupancy (docs/gpu-efficiency.md). Computed, so
// that live captures and traces stripped of Kineto's own figures get them too.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "common/worker_trace.h"

namespace podscope::analysis {

// The per-SM and per-block limits of one device.
struct SmLimits {
  int compute_major = 0, compute_minor = 0;
  int sm_count = 0;
  int warp_size = 32;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  int max_threads_per_block = 1024;
  int registers_per_sm = 65536;
  int registers_per_block = 65536;
  int max_registers_per_thread = 255;
  int register_unit = 256;              // registers are allocated per warp, in units of this many
  int64_t shared_memory_per_sm = 0;     // the largest carveout
  int64_t shared_memory_per_block = 0;  // the opt-in maximum a kernel may ask for
  int64_t shared_memory_reserved_per_block = 0;  // taken by the system from every block (8.0+)
  int shared_memory_unit = 256;                  // allocation granularity in bytes
};

// The limits of `device`: its compute capability's, overridden by the properties the device
// record carries. nullopt when the capability is outside 7.0-12.x and the record does not carry
// every limit, or the SM count is unknown.
std::optional<SmLimits> SmLimitsFor(const common::DeviceInfo& device);

struct KernelShape {
  uint64_t grid_blocks = 0;    // x * y * z
  uint64_t block_threads = 0;  // x * y * z
  int registers_per_thread = 0;
  int64_t shared_memory_bytes = 0;  // static + dynamic
};

enum class OccupancyLimiter : uint8_t {
  kNone = 0,
  kWarps,
  kBlocks,
  kRegisters,
  kSharedMemory,
  kInvalid
};
std::string_view OccupancyLimiterName(OccupancyLimiter limiter);

struct Occupancy {
  double blocks_per_sm = 0;  // grid blocks / SMs (Kineto's "blocks per SM")
  int active_blocks = 0;     // blocks one SM holds at once (0: the shape cannot run)
  double theoretical = 0;    // active warps / the SM's warps, 0..1
  // Est. Achieved Occupancy (Kineto's "est. achieved occupancy %" / 100): the SM's threads
  // busy when the grid is spread evenly, min(active_blocks, blocks_per_sm) x block threads /
  // threads per SM, 0..1.
  double achieved = 0;
  OccupancyLimiter limiter = OccupancyLimiter::kNone;  // what bounds active_blocks
};

// Pure. A block too large for the device, or asking more registers or shared memory than a
// block may have, gives active_blocks 0 and limiter kInvalid.
Occupancy ComputeOccupancy(const SmLimits& limits, const KernelShape& shape);

// The occupancy of one worker's kernels, from the limits of the devices its record lists.
class WorkerOccupancy {
 public:
  explicit WorkerOccupancy(const common::WorkerInfo& info);
  // nullopt when the kernel's launch shape (no block size) or its device's limits are unknown.
  std::optional<Occupancy> ForKernel(const common::KernelTable& kernels, size_t row) const;
  bool any_device() const { return !devices_.empty(); }

 private:
  std::vector<std::pair<int32_t, SmLimits>> devices_;  // by device id
};

}  // namespace podscope::analysis
