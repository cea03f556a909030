#include "analysis/temporal.h"

#include <gtest/gtest.h>

#include "common/trace_files.h"
#include "tests/analysis/hand_trace.h"
#include "tests/test_paths.h"

namespace podscope::analysis {
namespace {

using podscope::testing::KinetoFixture;

common::Capture Load(const std::string& job) {
  absl::StatusOr<common::Capture> capture =
      common::LoadCapture(*common::ExpandTraceInputs({KinetoFixture(job)}));
  EXPECT_TRUE(capture.ok()) << capture.status();
  return capture.ok() ? *std::move(capture) : common::Capture{};
}

struct HtaFigures {
  int rank;
  int64_t idle_us, compute_us, non_compute_us, kernel_time_us;
  double overlap_pct;
};

void ExpectHtaFigures(const std::string& job, const std::vector<HtaFigures>& expected) {
  const common::Capture capture = Load(job);
  const TemporalReport report =
      ComputeTemporal(common::CaptureView(capture), {.window = WindowMode::kHta});
  ASSERT_EQ(report.workers.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const WorkerTemporal& w = report.workers[i];
    const HtaFigures& e = expected[i];
    EXPECT_EQ(w.rank, e.rank);
    EXPECT_EQ(w.idle_ns, e.idle_us * 1000) << job << " rank " << e.rank;
    EXPECT_EQ(w.compute_ns, e.compute_us * 1000) << job << " rank " << e.rank;
    EXPECT_EQ(w.non_compute_ns, e.non_compute_us * 1000) << job << " rank " << e.rank;
    EXPECT_EQ(w.kernel_time_ns, e.kernel_time_us * 1000) << job << " rank " << e.rank;
    EXPECT_DOUBLE_EQ(w.overlap_pct, e.overlap_pct) << job << " rank " << e.rank;
  }
}

// The reference figures HTA 0.6.1 computed on the shared fixtures (data/kineto/README.md).
TEST(TemporalHtaTest, ReproducesHtaOnTraceFilter) {
  ExpectHtaFigures("trace_filter", {{0, 321378, 106252, 172428, 600058, 11.81},
                                    {1, 328671, 135548, 136455, 600674, 20.05}});
}

TEST(TemporalHtaTest, ReproducesHtaOnDlrm8Rank) {
  ExpectHtaFigures("dlrm_8rank", {{0, 6419, 1034, 5556, 13009, 4.50},
                                  {1, 6428, 1246, 11075, 18749, 2.47},
                                  {2, 7046, 1068, 3236, 11350, 7.88},
                                  {3, 8145, 1240, 9468, 18853, 3.31},
                                  {4, 8887, 1126, 6576, 16589, 0.56},
                                  {5, 9121, 1041, 6230, 16392, 0.64},
                                  {6, 7051, 1051, 3308, 11410, 7.56},
                                  {7, 8308, 1059, 1600, 10967, 9.51}});
}

TEST(TemporalHtaTest, ReproducesHtaIdleSplitOnStream7) {
  const common::Capture capture = Load("trace_filter");
  const TemporalReport report =
      ComputeTemporal(common::CaptureView(capture), {.window = WindowMode::kHta});
  const int64_t expected[2][3] = {{213825, 1985, 261740}, {156827, 1816, 281064}};
  for (int r = 0; r < 2; ++r) {
    const auto& streams = report.workers[r].idle_by_stream;
    auto it = std::find_if(streams.begin(), streams.end(),
                           [](const StreamIdle& s) { return s.stream == 7; });
    ASSERT_NE(it, streams.end());
    EXPECT_EQ(it->host_wait_ns, expected[r][0] * 1000) << r;
    EXPECT_EQ(it->kernel_wait_ns, expected[r][1] * 1000) << r;
    EXPECT_EQ(it->other_ns, expected[r][2] * 1000) << r;
  }
}

// A hand-computed case with fractional microseconds: HTA rounds starts up and ends down.
TEST(TemporalHtaTest, FractionalMicrosecondsRoundInward) {
  common::WorkerTrace w;
  w.info.rank = 0;
  auto kernel = [&w](TimeNs s, TimeNs e, const char* name, int64_t corr) {
    common::KernelTable& k = w.kernels;
    k.start.push_back(s);
    k.end.push_back(e);
    k.device.push_back(0);
    k.stream.push_back(7);
    k.name.push_back(w.strings.Intern(name));
    k.correlation.push_back(corr);
    for (auto* v : {&k.grid_x, &k.grid_y, &k.grid_z, &k.block_x, &k.block_y, &k.block_z})
      v->push_back(1);
    k.registers_per_thread.push_back(0);
    k.shared_memory_bytes.push_back(0);
    k.kernel_class.push_back(std::string_view(name).starts_with("nccl")
                                 ? common::KernelClass::kCommunication
                                 : common::KernelClass::kCompute);
  };
  kernel(1'500, 10'200, "gemm", 1);          // -> [2, 10) us
  kernel(8'000, 20'000, "ncclKernel_x", 2);  // -> [8, 20) us
  kernel(30'000, 31'999, "gemm", 3);         // -> [30, 31) us
  common::Capture capture;
  capture.workers.push_back(w);
  const TemporalReport r =
      ComputeTemporal(common::CaptureView(capture), {.window = WindowMode::kHta});
  const WorkerTemporal& t = r.workers[0];
  EXPECT_EQ(t.kernel_time_ns, 29'000);              // 2 .. 31
  EXPECT_EQ(t.idle_ns, 29'000 - (18'000 + 1'000));  // union [2,20) + [30,31)
  EXPECT_EQ(t.compute_ns, 8'000 + 1'000);
  EXPECT_EQ(t.non_compute_ns, 29'000 - 9'000 - 10'000);
  EXPECT_DOUBLE_EQ(t.overlap_pct, 16.67);  // [8,10) of [8,20)
}

// Zero-length device records (a real GPU's empty kernels) span nothing: a step whose kernels all
// last no time has no kernel time, idle or overlap, rather than whatever lay past the end of an
// empty interval list.
TEST(TemporalTest, OnlyZeroLengthKernelsSpanNothing) {
  common::WorkerTrace w = podscope::testing::HandTrace(0)
                              .Step(1, 0, 1'000)
                              .Kernel(100, 100, "empty", 50)
                              .Kernel(300, 300, "nccl_empty", 250)
                              .Build();
  for (WindowMode window : {WindowMode::kSteps, WindowMode::kHta}) {
    const WorkerTemporal t = ComputeWorkerTemporal(w, {.window = window});
    EXPECT_EQ(t.kernel_time_ns, 0);
    EXPECT_EQ(t.idle_ns, 0);
    EXPECT_EQ(t.compute_ns, 0);
    EXPECT_EQ(t.non_compute_ns, 0);
    EXPECT_EQ(t.overlap_pct, 0);
  }
}

}  // namespace
}  // namespace podscope::analysis
