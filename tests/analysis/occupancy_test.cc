#include "analysis/occupancy.h"

#include <gtest/gtest.h>

namespace podscope::analysis {
namespace {

common::DeviceInfo Device(int major, int minor, int sms) {
  common::DeviceInfo d;
  d.compute_major = major;
  d.compute_minor = minor;
  d.sm_count = sms;
  return d;
}

SmLimits Limits(int major, int minor, int sms) {
  std::optional<SmLimits> limits = SmLimitsFor(Device(major, minor, sms));
  EXPECT_TRUE(limits.has_value()) << major << "." << minor;
  return limits.value_or(SmLimits{});
}

Occupancy Occupy(const SmLimits& limits, uint64_t grid, uint64_t block, int registers,
                 int64_t shared) {
  return ComputeOccupancy(limits, {.grid_blocks = grid,
                                   .block_threads = block,
                                   .registers_per_thread = registers,
                                   .shared_memory_bytes = shared});
}

// V100 (7.0: 64 warps, 32 blocks, 64K registers, 96 KB, 256-byte units). Kineto's own example
// from the dlrm fixture: 128 threads and 72 registers take 2304 registers per warp, so 16384 / 2304
// = 7 warps per quarter file, 28 warps, 7 blocks; 13824 bytes of shared memory also allow 7
// (98304 / 13824); the registers are reached first. 64 blocks on 80 SMs: 0.8 per SM.
TEST(OccupancyTest, RegistersBoundAV100KernelAndTheGridBoundsWhatIsAchieved) {
  const Occupancy o = Occupy(Limits(7, 0, 80), 64, 128, 72, 13824);
  EXPECT_DOUBLE_EQ(o.blocks_per_sm, 0.8);
  EXPECT_EQ(o.active_blocks, 7);
  EXPECT_EQ(o.limiter, OccupancyLimiter::kRegisters);
  EXPECT_DOUBLE_EQ(o.theoretical, 7.0 * 4 / 64);
  EXPECT_DOUBLE_EQ(o.achieved, 0.8 * 128 / 2048);  // Kineto wrote 5 (%)
}

TEST(OccupancyTest, WarpsBoundLargeBlocks) {
  // 1024 threads = 32 warps: two blocks fill the SM's 64 warps; 32 registers do not bind (2).
  const Occupancy o = Occupy(Limits(7, 0, 80), 1000, 1024, 32, 0);
  EXPECT_EQ(o.active_blocks, 2);
  EXPECT_EQ(o.limiter, OccupancyLimiter::kWarps);
  EXPECT_DOUBLE_EQ(o.theoretical, 1.0);
  EXPECT_DOUBLE_EQ(o.achieved, 1.0);
}

TEST(OccupancyTest, TheBlockLimitBoundsTinyBlocks) {
  // One warp per block: 64 by warps, 128 by registers, 32 blocks per SM on 7.0, 24 on 8.9.
  Occupancy o = Occupy(Limits(7, 0, 80), 8000, 32, 16, 0);
  EXPECT_EQ(o.active_blocks, 32);
  EXPECT_EQ(o.limiter, OccupancyLimiter::kBlocks);
  EXPECT_DOUBLE_EQ(o.theoretical, 0.5);
  EXPECT_DOUBLE_EQ(o.achieved, 32.0 * 32 / 2048);
  o = Occupy(Limits(8, 9, 128), 8000, 32, 16, 0);
  EXPECT_EQ(o.active_blocks, 24);
  EXPECT_DOUBLE_EQ(o.theoretical, 24.0 / 48);
}

TEST(OccupancyTest, SharedMemoryBoundsAnA100KernelWithTheReservedKilobyte) {
  // 8.0: 164 KB per SM; a block of 48 KB takes 48 KB + 1 KB reserved, in 128-byte units:
  // 167936 / 50176 = 3 blocks. 108 blocks on 108 SMs: 1 per SM.
  Occupancy o = Occupy(Limits(8, 0, 108), 108, 256, 32, 48 * 1024);
  EXPECT_EQ(o.active_blocks, 3);
  EXPECT_EQ(o.limiter, OccupancyLimiter::kSharedMemory);
  EXPECT_DOUBLE_EQ(o.theoretical, 3.0 * 8 / 64);
  EXPECT_DOUBLE_EQ(o.achieved, 1.0 * 256 / 2048);
  // Above the 48 KB default a kernel must have opted in, and it runs: 65 KB per block, 2 blocks.
  // (Kineto compares with the default limit and writes 0 % for such kernels.)
  o = Occupy(Limits(8, 0, 108), 216, 256, 32, 64 * 1024);
  EXPECT_EQ(o.active_blocks, 2);
  EXPECT_DOUBLE_EQ(o.achieved, 2.0 * 256 / 2048);
}

TEST(OccupancyTest, HopperAndBlackwellRegisterLimits) {
  // 9.0: 64 registers x 32 = 2048 per warp; 16384 / 2048 = 8 warps per quarter, 32 warps, 4
  // blocks of 8 warps. 264 blocks on 132 SMs: 2 per SM, so 2 x 256 threads of 2048 are busy.
  Occupancy o = Occupy(Limits(9, 0, 132), 264, 256, 64, 0);
  EXPECT_EQ(o.active_blocks, 4);
  EXPECT_EQ(o.limiter, OccupancyLimiter::kRegisters);
  EXPECT_DOUBLE_EQ(o.theoretical, 0.5);
  EXPECT_DOUBLE_EQ(o.achieved, 0.25);
  // 10.0: 255 registers round to 8192 per warp: 2 warps per quarter, 8 warps, 2 blocks of 4.
  o = Occupy(Limits(10, 0, 148), 1000, 128, 255, 0);
  EXPECT_EQ(o.active_blocks, 2);
  EXPECT_DOUBLE_EQ(o.theoretical, 2.0 * 4 / 64);
  // 12.0 (48 warps): 128 registers = 4096 per warp; 4 per quarter, 16 warps, 8 blocks of 2.
  o = Occupy(Limits(12, 0, 170), 1000, 64, 128, 0);
  EXPECT_EQ(o.active_blocks, 8);
  EXPECT_DOUBLE_EQ(o.theoretical, 8.0 * 2 / 48);
}

TEST(OccupancyTest, TuringHasHalfTheWarps) {
  // 7.5: 32 warps per SM, so four blocks of 8 warps fill it.
  const Occupancy o = Occupy(Limits(7, 5, 40), 400, 256, 0, 0);
  EXPECT_EQ(o.active_blocks, 4);
  EXPECT_EQ(o.limiter, OccupancyLimiter::kWarps);
  EXPECT_DOUBLE_EQ(o.theoretical, 1.0);
  EXPECT_DOUBLE_EQ(o.achieved, 4.0 * 256 / 1024);
}

TEST(OccupancyTest, ShapesThatCannotRunAreInvalid) {
  const SmLimits h100 = Limits(9, 0, 132);
  EXPECT_EQ(Occupy(h100, 1, 2048, 32, 0).limiter, OccupancyLimiter::kInvalid);   // block > 1024
  EXPECT_EQ(Occupy(h100, 1, 128, 256, 0).limiter, OccupancyLimiter::kInvalid);   // > 255 registers
  EXPECT_EQ(Occupy(h100, 1, 1024, 255, 0).limiter, OccupancyLimiter::kInvalid);  // 262144 > 65536
  EXPECT_EQ(Occupy(h100, 1, 128, 32, 228 * 1024).limiter, OccupancyLimiter::kInvalid);  // > 227 KB
  EXPECT_EQ(Occupy(h100, 1, 0, 32, 0).limiter, OccupancyLimiter::kInvalid);
  EXPECT_EQ(Occupy(h100, 1, 0, 32, 0).active_blocks, 0);
}

TEST(OccupancyTest, TheDeviceRecordOverridesItsCapabilityAndUnknownDevicesGetNothing) {
  common::DeviceInfo d = Device(9, 0, 132);
  d.max_threads_per_sm = 1024;
  d.shared_memory_per_sm = 64 * 1024;
  std::optional<SmLimits> limits = SmLimitsFor(d);
  ASSERT_TRUE(limits.has_value());
  EXPECT_EQ(limits->max_threads_per_sm, 1024);
  EXPECT_EQ(limits->shared_memory_per_sm, 64 * 1024);
  EXPECT_EQ(limits->shared_memory_reserved_per_block, 1024);
  EXPECT_EQ(limits->shared_memory_unit, 128);
  EXPECT_FALSE(SmLimitsFor(Device(6, 0, 56)).has_value());   // Pascal: other rules
  EXPECT_FALSE(SmLimitsFor(Device(9, 0, 0)).has_value());    // no SM count
  EXPECT_FALSE(SmLimitsFor(Device(11, 0, 20)).has_value());  // unknown, and the record is silent
  common::DeviceInfo described = Device(11, 0, 20);
  described.max_threads_per_sm = 1536;
  described.shared_memory_per_sm = 100 * 1024;
  described.shared_memory_per_block_optin = 99 * 1024;
  limits = SmLimitsFor(described);
  ASSERT_TRUE(limits.has_value());
  EXPECT_EQ(limits->max_blocks_per_sm, 32);
}

TEST(OccupancyTest, WorkerKernelsUseTheirOwnDevice) {
  common::WorkerInfo info;
  info.devices = {Device(7, 0, 80)};
  info.devices[0].id = 3;
  common::KernelTable k;
  for (int32_t device : {3, 0}) {
    k.device.push_back(device);
    k.grid_x.push_back(64), k.grid_y.push_back(1), k.grid_z.push_back(1);
    k.block_x.push_back(128), k.block_y.push_back(1), k.block_z.push_back(1);
    k.registers_per_thread.push_back(72);
    k.shared_memory_bytes.push_back(13824);
  }
  const WorkerOccupancy occupancy(info);
  ASSERT_TRUE(occupancy.ForKernel(k, 0).has_value());
  EXPECT_DOUBLE_EQ(occupancy.ForKernel(k, 0)->achieved, 0.05);
  EXPECT_FALSE(occupancy.ForKernel(k, 1).has_value());  // device 0 is not described
  k.block_x[0] = 0;
  EXPECT_FALSE(occupancy.ForKernel(k, 0).has_value());  // no launch shape
  // A hostile shape whose product does not fit 64 bits is no launch at all.
  k.block_x[0] = 128;
  k.grid_x[0] = k.grid_y[0] = k.grid_z[0] = 0xffffffffu;
  EXPECT_FALSE(occupancy.ForKernel(k, 0).has_value());
  // A device record claiming fewer threads per SM than a warp computes nothing.
  common::DeviceInfo odd = Device(9, 0, 132);
  odd.max_threads_per_sm = 16;
  EXPECT_EQ(Occupy(*SmLimitsFor(odd), 1, 32, 32, 0).limiter, OccupancyLimiter::kInvalid);
}

}  // namespace
}  // namespace podscope::analysis
