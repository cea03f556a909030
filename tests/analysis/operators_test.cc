#include "analysis/operators.h"

#include <gtest/gtest.h>

#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
namespace {

using podscope::testing::HandTrace;

const OperatorStats* Find(const std::vector<OperatorStats>& list, const std::string& name) {
  for (const OperatorStats& s : list) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// Rank 0, one thread, inside step 1 (a marker, not an operator):
//   forward 0-100 holds aten::mm 10-40 (its launch 20-25 -> kernel 30-60), aten::relu 50-70
//   (launch 55-60 -> kernel 60-70), its own copy call 80-85 (-> copy 90-110) and aten::mm
//   86-95 (no launch). A launch at 150, outside every operator, belongs to none.
// Rank 1: aten::mm 0-50 launching a 100 ns kernel.
common::Capture Workers() {
  common::Capture capture;
  capture.workers.push_back(HandTrace(0, 2)
                                .Step(1, 0, 200)
                                .Span(0, 100, "forward")
                                .Span(10, 40, "aten::mm")
                                .Kernel(30, 60, "gemm", 20)
                                .Span(50, 70, "aten::relu", common::HostSpanCategory::kOp)
                                .Kernel(60, 70, "relu", 55)
                                .Memcpy(90, 110, common::MemcpyKind::kHostToDevice, 80)
                                .Span(86, 95, "aten::mm")
                                .Kernel(160, 190, "stray", 150)
                                .Build());
  capture.workers.push_back(
      HandTrace(1, 2).Span(0, 50, "aten::mm").Kernel(10, 110, "gemm", 0).Build());
  return capture;
}

TEST(OperatorsTest, HostSelfTimeAndDeviceTimeByHand) {
  const common::Capture capture = Workers();
  const OperatorReport r = ComputeOperators(common::CaptureView(capture));
  ASSERT_EQ(r.workers.size(), 2u);
  const std::vector<OperatorStats>& ops = r.workers[0].top;
  ASSERT_EQ(ops.size(), 3u);  // the step marker is not an operator
  const OperatorStats* forward = Find(ops, "forward");
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(forward->calls, 1u);
  EXPECT_EQ(forward->host_total_ns, 100);
  EXPECT_EQ(forward->host_self_ns, 100 - 30 - 20 - 5 - 9);  // children and its own call
  EXPECT_EQ(forward->device_self_ns, 20);                   // the copy
  EXPECT_EQ(forward->device_total_ns, 20 + 30 + 10);
  const OperatorStats* mm = Find(ops, "aten::mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->calls, 2u);
  EXPECT_EQ(mm->host_total_ns, 39);
  EXPECT_EQ(mm->host_self_ns, 25 + 9);
  EXPECT_EQ(mm->device_self_ns, 30);
  EXPECT_EQ(mm->device_total_ns, 30);
  const OperatorStats* relu = Find(ops, "aten::relu");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(relu->host_self_ns, 15);
  EXPECT_EQ(relu->device_self_ns, 10);
  // Worst first: by device self time.
  EXPECT_EQ(ops[0].name, "aten::mm");
  EXPECT_EQ(ops[1].name, "forward");

  ASSERT_EQ(r.pod.size(), 3u);
  EXPECT_EQ(r.pod[0].stats.name, "aten::mm");
  EXPECT_EQ(r.pod[0].stats.calls, 3u);
  EXPECT_EQ(r.pod[0].stats.device_total_ns, 130);
  ASSERT_EQ(r.pod[0].costliest.size(), 2u);
  EXPECT_EQ(r.pod[0].costliest[0].rank, 1);  // 100 ns of device time there, 30 on rank 0
  EXPECT_EQ(r.pod[0].costliest[0].device_total_ns, 100);
  EXPECT_EQ(r.pod[0].costliest[1].rank, 0);
  EXPECT_EQ(ComputeOperators(common::CaptureView(capture), 1).pod.size(), 1u);
}

// Two operators over exactly the same span (microsecond traces have them: aten::linear around
// its aten::addmm): the one recorded first is the outer, whatever the sort does with ties.
TEST(OperatorsTest, OfTwoOperatorsOverOneSpanTheFirstRecordedIsOuter) {
  for (const bool linear_first : {true, false}) {
    HandTrace t(0, 1);
    for (int i = 0; i < 40; ++i) {  // enough items that the sort is not trivial
      const TimeNs at = 1000 * i;
      const char* first = linear_first ? "aten::linear" : "aten::addmm";
      const char* second = linear_first ? "aten::addmm" : "aten::linear";
      t.Span(at, at + 100, first, common::HostSpanCategory::kOp)
          .Span(at, at + 100, second, common::HostSpanCategory::kOp)
          .Kernel(at + 30, at + 60, "gemm", /*launch=*/at + 10);  // its call: 5 ns
    }
    common::Capture capture;
    capture.workers.push_back(t.Build());
    const OperatorReport r = ComputeOperators(common::CaptureView(capture));
    const OperatorStats* outer =
        Find(r.workers[0].top, linear_first ? "aten::linear" : "aten::addmm");
    const OperatorStats* inner =
        Find(r.workers[0].top, linear_first ? "aten::addmm" : "aten::linear");
    ASSERT_NE(outer, nullptr);
    ASSERT_NE(inner, nullptr);
    EXPECT_EQ(outer->host_self_ns, 0) << linear_first;
    EXPECT_EQ(outer->device_self_ns, 0) << linear_first;
    EXPECT_EQ(outer->device_total_ns, 40 * 30) << linear_first;
    EXPECT_EQ(inner->host_self_ns, 40 * 95) << linear_first;
    EXPECT_EQ(inner->device_self_ns, 40 * 30) << linear_first;
  }
}

TEST(OperatorsTest, ThreadsAreSeparateAndSyncRecordsAreNotDeviceWork) {
  HandTrace t(0, 1);
  t.Span(0, 100, "outer", common::HostSpanCategory::kAnnotation, /*thread=*/1)
      .Span(10, 20, "other_thread_op", common::HostSpanCategory::kOp, /*thread=*/2)
      .Runtime(12, 14, "cudaLaunchKernel", 77, /*thread=*/2)
      .Runtime(30, 35, "cudaDeviceSynchronize", 78, /*thread=*/1);
  common::Capture capture;
  capture.workers.push_back(t.Build());
  common::KernelTable& k = capture.workers[0].kernels;
  for (const auto& [corr, kind] : {std::pair{int64_t{77}, common::KernelClass::kCompute},
                                   std::pair{int64_t{78}, common::KernelClass::kSync}}) {
    k.start.push_back(40), k.end.push_back(90), k.device.push_back(0), k.stream.push_back(7);
    k.name.push_back(capture.workers[0].strings.Intern("k"));
    k.correlation.push_back(corr);
    for (auto* v : {&k.grid_x, &k.grid_y, &k.grid_z, &k.block_x, &k.block_y, &k.block_z})
      v->push_back(1);
    k.registers_per_thread.push_back(0), k.shared_memory_bytes.push_back(0),
        k.kernel_class.push_back(kind);
  }
  const OperatorReport r = ComputeOperators(common::CaptureView(capture));
  const OperatorStats* outer = Find(r.workers[0].top, "outer");
  const OperatorStats* inner = Find(r.workers[0].top, "other_thread_op");
  ASSERT_NE(outer, nullptr);
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(outer->host_self_ns, 95);    // the other thread's op is not its child; its call is
  EXPECT_EQ(outer->device_total_ns, 0);  // a sync record is not device work
  EXPECT_EQ(inner->device_self_ns, 50);

  // Work without a correlation id (-1, as the importer writes a missing one) belongs to no call,
  // even to a call that has none either.
  common::WorkerTrace& w = capture.workers[0];
  w.runtime_calls.start.push_back(50), w.runtime_calls.end.push_back(52),
      w.runtime_calls.thread.push_back(1);
  w.runtime_calls.name.push_back(w.strings.Intern("cudaLaunchKernel"));
  w.runtime_calls.correlation.push_back(-1), w.runtime_calls.external_id.push_back(-1);
  w.runtime_calls.api_kind.push_back(common::ApiKind::kRuntime);
  k.correlation[1] = -1;
  k.kernel_class[1] = common::KernelClass::kCompute;
  w.SortByTime();
  const OperatorReport again = ComputeOperators(common::CaptureView(capture));
  EXPECT_EQ(Find(again.workers[0].top, "outer")->device_total_ns, 0);
}

}  // namespace
}  // namespace podscope::analysis
