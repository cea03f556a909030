#include "analysis/gpu_efficiency.h"

#include <gtest/gtest.h>

#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
namespace {

using podscope::testing::HandTrace;

common::DeviceInfo V100() {
  common::DeviceInfo d;
  d.name = "Tesla V100-SXM2-32GB";
  d.compute_major = 7;
  d.sm_count = 80;
  return d;
}

// Rank 0 on a V100 (80 SMs), blocks of 128 threads and 32 registers (16 fit an SM):
//   step 1 (host 0-100): A 10-40 with 40 blocks (0.5 per SM), B 30-60 with 16 (0.2), C 80-110
//   with 160 (2.0); its device span is 10-110.
//   step 2 (host 200-300): D 210-260 with no launch shape.
// Rank 1 has no device record: one kernel 0-50 in step 1 (host 0-100).
common::Capture TwoWorkers() {
  common::Capture capture;
  capture.workers.push_back(HandTrace(0, 2)
                                .Device(V100())
                                .Step(1, 0, 100)
                                .Kernel(10, 40, "A", 5)
                                .Shape(40, 128)
                                .Kernel(30, 60, "B", 6)
                                .Shape(16, 128)
                                .Kernel(80, 110, "C", 7)
                                .Shape(160, 128)
                                .Step(2, 200, 300)
                                .Kernel(210, 260, "D", 205)
                                .Shape(1, 0)
                                .Build());
  capture.workers.push_back(HandTrace(1, 2).Step(1, 0, 100).Kernel(0, 50, "E", 1).Build());
  return capture;
}

TEST(GpuEfficiencyTest, UtilizationSmEfficiencyAndOccupancyByHand) {
  const common::Capture capture = TwoWorkers();
  const common::CaptureView view(capture);
  const GpuReport r = ComputeGpuEfficiency(view, FindAllSteps(view));
  ASSERT_EQ(r.workers.size(), 2u);
  const WorkerGpu& w = r.workers[0];
  EXPECT_EQ(w.device, "Tesla V100-SXM2-32GB");
  EXPECT_EQ(w.kernels, 4u);
  EXPECT_EQ(w.kernels_without_occupancy, 1u);
  ASSERT_EQ(w.steps.size(), 2u);
  const GpuFigures& s1 = w.steps[0].figures;
  EXPECT_EQ(w.steps[0].step, 1);
  EXPECT_EQ(s1.span_ns, 100);  // 10-110
  EXPECT_EQ(s1.busy_ns, 80);   // 10-60 and 80-110
  EXPECT_DOUBLE_EQ(s1.gpu_utilization, 0.8);
  // 10-30: 0.5; 30-40: 0.5 + 0.2; 40-60: 0.2; 80-110: 2.0 capped at 1; over the 100 ns span.
  ASSERT_TRUE(s1.sm_efficiency.has_value());
  EXPECT_NEAR(*s1.sm_efficiency, (0.5 * 20 + 0.7 * 10 + 0.2 * 20 + 1.0 * 30) / 100, 1e-12);
  // min(16, blocks per SM) x 128 / 2048 per kernel, weighted by its 30 ns each.
  ASSERT_TRUE(s1.achieved_occupancy.has_value());
  EXPECT_NEAR(*s1.achieved_occupancy, (0.5 + 0.2 + 2.0) * 128 / 2048 / 3, 1e-12);
  const GpuFigures& s2 = w.steps[1].figures;
  EXPECT_EQ(s2.span_ns, 50);
  EXPECT_DOUBLE_EQ(s2.gpu_utilization, 1.0);
  EXPECT_FALSE(s2.sm_efficiency.has_value());  // D's shape is unknown: busy, but no estimate
  EXPECT_FALSE(s2.achieved_occupancy.has_value());
  EXPECT_EQ(w.total.span_ns, 150);
  EXPECT_EQ(w.total.busy_ns, 130);
  EXPECT_NEAR(*w.total.sm_efficiency, 51.0 / 150, 1e-12);
  EXPECT_NEAR(*w.total.achieved_occupancy, *s1.achieved_occupancy, 1e-12);

  const WorkerGpu& unknown = r.workers[1];
  EXPECT_DOUBLE_EQ(unknown.total.gpu_utilization, 1.0);  // 0-50 is its whole device span
  EXPECT_FALSE(unknown.total.sm_efficiency.has_value());
  EXPECT_EQ(unknown.kernels_without_occupancy, 1u);

  ASSERT_TRUE(r.pod.median_gpu_utilization.has_value());
  EXPECT_NEAR(*r.pod.median_gpu_utilization, (130.0 / 150 + 1.0) / 2, 1e-12);
  EXPECT_NEAR(*r.pod.median_sm_efficiency, 51.0 / 150, 1e-12);
  EXPECT_EQ(r.pod.least_utilized, (std::vector<int32_t>{0, 1}));
}

TEST(GpuEfficiencyTest, AStepRangeKeepsItsStepsAndSyncRecordsAreNotKernels) {
  common::Capture capture = TwoWorkers();
  // A sync record over the whole of step 2 would make it busy; it is not a kernel.
  common::KernelTable& k = capture.workers[0].kernels;
  k.start.push_back(200), k.end.push_back(300), k.device.push_back(0), k.stream.push_back(7);
  k.name.push_back(capture.workers[0].strings.Intern("cudaDeviceSynchronize"));
  k.correlation.push_back(99);
  for (auto* v : {&k.grid_x, &k.grid_y, &k.grid_z, &k.block_x, &k.block_y, &k.block_z})
    v->push_back(0);
  k.registers_per_thread.push_back(0), k.shared_memory_bytes.push_back(0);
  k.kernel_class.push_back(common::KernelClass::kSync);
  capture.workers[0].SortByTime();
  const common::CaptureView view(capture);
  const GpuReport r = ComputeGpuEfficiency(view, FindAllSteps(view), 2, 2);
  ASSERT_EQ(r.workers[0].steps.size(), 1u);
  EXPECT_EQ(r.workers[0].steps[0].step, 2);
  EXPECT_EQ(r.workers[0].total.busy_ns, 50);
  EXPECT_EQ(r.workers[0].kernels, 4u);
  EXPECT_TRUE(r.workers[1].steps.empty());
  EXPECT_EQ(r.pod.least_utilized, (std::vector<int32_t>{0}));  // rank 1 has no step 2
}

}  // namespace
}  // namespace podscope::analysis
