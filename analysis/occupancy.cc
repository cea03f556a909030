#include "analysis/occupancy.h"

#include <algorithm>
#include <limits>

namespace podscope::analysis {
namespace {

// Per compute capability: threads and blocks per SM, shared memory per SM (the largest
// carveout) and the opt-in maximum per block. Registers are 64K per SM and per block, and 255
// per thread, on every one of them. From NVIDIA's CUDA programming guide (compute capability
// table), its occupancy calculator header (cuda_occupancy.h) and libcu++'s arch traits.
struct Capability {
  int major, minor;
  int max_threads_per_sm, max_blocks_per_sm;
  int64_t shared_per_sm_kb, shared_per_block_kb;
};
constexpr Capability kCapabilities[] = {
    {7, 0, 2048, 32, 96, 96},     // V100
    {7, 2, 2048, 32, 96, 96},     // Xavier
    {7, 5, 1024, 16, 64, 64},     // T4, RTX 20
    {8, 0, 2048, 32, 164, 163},   // A100
    {8, 6, 1536, 16, 100, 99},    // A10, RTX 30
    {8, 7, 1536, 16, 164, 163},   // Orin
    {8, 9, 1536, 24, 100, 99},    // L4, L40, RTX 40
    {9, 0, 2048, 32, 228, 227},   // H100, H200
    {10, 0, 2048, 32, 228, 227},  // B200
    {10, 3, 2048, 32, 228, 227},  // B300
    {12, 0, 1536, 24, 100, 99},   // RTX 50, RTX PRO
    {12, 1, 1536, 24, 100, 99},   // DGX Spark
};

const Capability* FindCapability(int major, int minor) {
  for (const Capability& c : kCapabilities) {
    if (c.major == major && c.minor == minor) return &c;
  }
  return nullptr;
}

constexpr int64_t RoundUp(int64_t value, int64_t unit) { return (value + unit - 1) / unit * unit; }

}  // namespace

std::string_view OccupancyLimiterName(OccupancyLimiter limiter) {
  switch (limiter) {
    case OccupancyLimiter::kNone:
      return "none";
    case OccupancyLimiter::kWarps:
      return "warps";
    case OccupancyLimiter::kBlocks:
      return "blocks";
    case OccupancyLimiter::kRegisters:
      return "registers";
    case OccupancyLimiter::kSharedMemory:
      return "shared_memory";
    case OccupancyLimiter::kInvalid:
      return "invalid";
  }
  return "none";
}

std::optional<SmLimits> SmLimitsFor(const common::DeviceInfo& device) {
  if (device.sm_count <= 0) return std::nullopt;
  SmLimits limits;
  limits.compute_major = device.compute_major;
  limits.compute_minor = device.compute_minor;
  limits.sm_count = device.sm_count;
  if (const Capability* c = FindCapability(device.compute_major, device.compute_minor)) {
    limits.max_threads_per_sm = c->max_threads_per_sm;
    limits.max_blocks_per_sm = c->max_blocks_per_sm;
    limits.shared_memory_per_sm = c->shared_per_sm_kb * 1024;
    limits.shared_memory_per_block = c->shared_per_block_kb * 1024;
  } else if (device.compute_major < 7 || device.max_threads_per_sm <= 0 ||
             device.shared_memory_per_sm <= 0 || device.shared_memory_per_block_optin <= 0) {
    return std::nullopt;  // before Volta the rules differ; after 12.x we would only guess
  } else {
    limits.max_blocks_per_sm = 32;
  }
  // From 8.0 the system keeps 1 KB of every block's shared memory, allocated in 128-byte units.
  if (device.compute_major >= 8) {
    limits.shared_memory_reserved_per_block = 1024;
    limits.shared_memory_unit = 128;
  }
  // What the device record says wins over the table (a part may differ from its family's).
  if (device.max_threads_per_sm > 0) limits.max_threads_per_sm = device.max_threads_per_sm;
  if (device.max_threads_per_block > 0) limits.max_threads_per_block = device.max_threads_per_block;
  if (device.registers_per_sm > 0) limits.registers_per_sm = device.registers_per_sm;
  if (device.registers_per_block > 0) limits.registers_per_block = device.registers_per_block;
  if (device.shared_memory_per_sm > 0) limits.shared_memory_per_sm = device.shared_memory_per_sm;
  if (device.shared_memory_per_block_optin > 0)
    limits.shared_memory_per_block = device.shared_memory_per_block_optin;
  return limits;
}

Occupancy ComputeOccupancy(const SmLimits& limits, const KernelShape& shape) {
  Occupancy out;
  if (limits.sm_count > 0)
    out.blocks_per_sm = static_cast<double>(shape.grid_blocks) / limits.sm_count;
  const int64_t threads = static_cast<int64_t>(shape.block_threads);
  if (threads <= 0 || threads > limits.max_threads_per_block || shape.registers_per_thread < 0 ||
      shape.registers_per_thread > limits.max_registers_per_thread ||
      shape.shared_memory_bytes < 0 || limits.max_threads_per_sm <= 0) {
    out.limiter = OccupancyLimiter::kInvalid;
    return out;
  }
  const int64_t warps = (threads + limits.warp_size - 1) / limits.warp_size;
  const int64_t sm_warps = limits.max_threads_per_sm / limits.warp_size;
  if (sm_warps == 0) {  // a device record claiming fewer threads per SM than a warp
    out.limiter = OccupancyLimiter::kInvalid;
    return out;
  }
  constexpr int64_t kUnlimited = std::numeric_limits<int32_t>::max();

  const int64_t by_warps = sm_warps / warps;
  const int64_t by_blocks = limits.max_blocks_per_sm;

  // Registers go to warps in units of 256, and to the SM's four schedulers' files in quarters.
  int64_t by_registers = kUnlimited;
  if (shape.registers_per_thread > 0) {
    const int64_t per_warp =
        RoundUp(int64_t{shape.registers_per_thread} * limits.warp_size, limits.register_unit);
    if (per_warp * RoundUp(warps, 4) > limits.registers_per_block) {
      out.limiter = OccupancyLimiter::kInvalid;
      return out;
    }
    by_registers = (limits.registers_per_sm / 4 / per_warp) * 4 / warps;
  }

  int64_t by_shared = kUnlimited;
  const int64_t shared =
      RoundUp(shape.shared_memory_bytes + limits.shared_memory_reserved_per_block,
              limits.shared_memory_unit);
  if (shape.shared_memory_bytes > limits.shared_memory_per_block) {
    out.limiter = OccupancyLimiter::kInvalid;
    return out;
  }
  if (shared > 0) by_shared = limits.shared_memory_per_sm / shared;

  // The first limit reached names the limiter, in the calculator's order.
  const std::pair<int64_t, OccupancyLimiter> bounds[] = {
      {by_warps, OccupancyLimiter::kWarps},
      {by_registers, OccupancyLimiter::kRegisters},
      {by_shared, OccupancyLimiter::kSharedMemory},
      {by_blocks, OccupancyLimiter::kBlocks}};
  int64_t active = kUnlimited;
  for (const auto& [bound, limiter] : bounds) {
    if (bound < active) {
      active = bound;
      out.limiter = limiter;
    }
  }
  out.active_blocks = static_cast<int>(active);
  out.theoretical = static_cast<double>(active * warps) / static_cast<double>(sm_warps);
  const double resident = std::min(static_cast<double>(active), out.blocks_per_sm);
  out.achieved = resident * static_cast<double>(threads) / limits.max_threads_per_sm;
  return out;
}

WorkerOccupancy::WorkerOccupancy(const common::WorkerInfo& info) {
  for (const common::DeviceInfo& device : info.devices) {
    if (std::optional<SmLimits> limits = SmLimitsFor(device))
      devices_.emplace_back(device.id, *limits);
  }
}

std::optional<Occupancy> WorkerOccupancy::ForKernel(const common::KernelTable& kernels,
                                                    size_t row) const {
  // A trace's shape is three 32-bit numbers each: their products may not fit, and such a shape
  // is not a launch any GPU takes.
  uint64_t threads = 0, grid = 0;
  if (__builtin_mul_overflow(uint64_t{kernels.block_x[row]} * kernels.block_y[row],
                             uint64_t{kernels.block_z[row]}, &threads) ||
      __builtin_mul_overflow(uint64_t{kernels.grid_x[row]} * kernels.grid_y[row],
                             uint64_t{kernels.grid_z[row]}, &grid) ||
      threads == 0) {
    return std::nullopt;
  }
  for (const auto& [id, limits] : devices_) {
    if (id != kernels.device[row]) continue;
    const KernelShape shape{.grid_blocks = grid,
                            .block_threads = threads,
                            .registers_per_thread = kernels.registers_per_thread[row],
                            .shared_memory_bytes = kernels.shared_memory_bytes[row]};
    return ComputeOccupancy(limits, shape);
  }
  return std::nullopt;
}

}  // namespace podscope::analysis
