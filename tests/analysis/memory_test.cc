#include "analysis/memory.h"

#include <gtest/gtest.h>

#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
namespace {

using podscope::testing::HandTrace;

void Event(common::WorkerTrace& t, TimeNs time, int32_t device, int64_t bytes, int64_t allocated,
           int64_t reserved, int64_t thread = 1) {
  common::MemoryEventTable& m = t.memory_events;
  m.time.push_back(time);
  m.device.push_back(device);
  m.bytes.push_back(bytes);
  m.total_allocated.push_back(allocated);
  m.total_reserved.push_back(reserved);
  m.thread.push_back(thread);
}

// Rank 0, GPU 0 of 1000 bytes: +100 at 10 inside aten::empty (5-15), +300 at 20 inside aten::mm
// (18-30, itself inside forward 0-100), -100 at 25; reserved 200 then 512. On the host, +64 with
// no totals at 40 and +32 at 50 (running sum 96), outside any operator but forward.
// Rank 1 has no memory events; rank 2 a GPU of 1000 bytes at 900 allocated (its nearest OOM).
TEST(MemoryTest, PeaksHeadroomAndTheOperatorsThatAllocatedByHand) {
  common::Capture capture;
  common::DeviceInfo gpu;
  gpu.id = 0;
  gpu.total_memory_bytes = 1000;
  common::WorkerTrace r0 = HandTrace(0, 3)
                               .Device(gpu)
                               .Span(0, 100, "forward")
                               .Span(5, 15, "aten::empty")
                               .Span(18, 30, "aten::mm")
                               .Build();
  Event(r0, 10, 0, 100, 100, 200);
  Event(r0, 20, 0, 300, 400, 512);
  Event(r0, 25, 0, -100, 300, 512);
  Event(r0, 50, -1, 32, common::kUnknownBytes, common::kUnknownBytes);
  Event(r0, 40, -1, 64, common::kUnknownBytes, common::kUnknownBytes);
  Event(r0, 60, 0, 8, 308, 512, /*thread=*/2);  // another thread: no operator there
  capture.workers.push_back(std::move(r0));
  capture.workers.push_back(HandTrace(1, 3).Kernel(0, 10).Build());
  common::WorkerTrace r2 = HandTrace(2, 3).Device(gpu).Build();
  Event(r2, 5, 0, 900, 900, 900);
  capture.workers.push_back(std::move(r2));

  const MemoryReport r = ComputeMemory(common::CaptureView(capture));
  ASSERT_EQ(r.workers.size(), 2u);  // rank 1 has nothing to show
  const WorkerMemory& w = r.workers[0];
  ASSERT_EQ(w.devices.size(), 2u);
  const DeviceMemory& host = w.devices[0];
  EXPECT_EQ(host.device, -1);
  EXPECT_EQ(host.events, 2u);
  EXPECT_EQ(host.peak_allocated_bytes, 96);  // 64 then 32, by time, no totals given
  EXPECT_EQ(host.peak_time, 50);
  EXPECT_EQ(host.peak_reserved_bytes, -1);
  EXPECT_FALSE(host.total_memory_bytes.has_value());
  const DeviceMemory& d = w.devices[1];
  EXPECT_EQ(d.device, 0);
  EXPECT_EQ(d.events, 4u);
  EXPECT_EQ(d.peak_allocated_bytes, 400);
  EXPECT_EQ(d.peak_time, 20);
  EXPECT_EQ(d.peak_reserved_bytes, 512);
  EXPECT_EQ(d.total_memory_bytes, 1000);
  EXPECT_EQ(d.headroom_bytes, 1000 - 512);
  ASSERT_EQ(d.timeline.size(), 4u);
  EXPECT_EQ(d.timeline[2].allocated, 300);
  EXPECT_EQ(d.timeline[2].reserved, 512);

  ASSERT_EQ(w.top_operators.size(), 3u);
  EXPECT_EQ(w.top_operators[0].name, "aten::mm");
  EXPECT_EQ(w.top_operators[0].bytes, 300);
  EXPECT_EQ(w.top_operators[1].name, "aten::empty");
  EXPECT_EQ(w.top_operators[1].bytes, 100);
  EXPECT_EQ(w.top_operators[2].name, "forward");  // the host's 64 + 32, inside forward alone
  EXPECT_EQ(w.top_operators[2].bytes, 96);
  EXPECT_EQ(w.top_operators[2].allocations, 2u);

  ASSERT_TRUE(r.nearest_oom.has_value());
  EXPECT_EQ(r.nearest_oom->rank, 2);
  EXPECT_EQ(r.nearest_oom->peak_bytes, 900);
  EXPECT_EQ(r.nearest_oom->headroom_bytes, 100);
}

// The agent's NVML samples of a GPU (memory used, no allocator events) give its reserved line and
// its headroom; nothing is allocated that the samples do not say.
TEST(MemoryTest, MemorySamplesAloneGiveTheReservedLineAndTheHeadroom) {
  common::DeviceInfo gpu;
  gpu.id = 1;
  gpu.total_memory_bytes = 80;
  common::WorkerTrace t = HandTrace(4, 8).Device(gpu).Build();
  Event(t, 10, 1, 0, common::kUnknownBytes, 30, 0);
  Event(t, 20, 1, 0, common::kUnknownBytes, 70, 0);
  Event(t, 30, 1, 0, common::kUnknownBytes, 50, 0);
  common::Capture capture;
  capture.workers.push_back(std::move(t));
  const MemoryReport r = ComputeMemory(common::CaptureView(capture));
  const DeviceMemory& d = r.workers.at(0).devices.at(0);
  EXPECT_EQ(d.peak_allocated_bytes, -1);
  EXPECT_EQ(d.peak_reserved_bytes, 70);
  EXPECT_EQ(d.headroom_bytes, 10);
  EXPECT_EQ(d.timeline.at(1).allocated, -1);
  EXPECT_EQ(d.timeline.at(1).reserved, 70);
  EXPECT_TRUE(r.workers.at(0).top_operators.empty());
  ASSERT_TRUE(r.nearest_oom.has_value());
  EXPECT_EQ(r.nearest_oom->rank, 4);
  EXPECT_EQ(r.nearest_oom->peak_bytes, 70);
}

// A long run keeps at most kMemoryTimelinePoints points, and its peak among them.
TEST(MemoryTest, TheTimelineIsBoundedAndKeepsThePeak) {
  common::WorkerTrace t = HandTrace(0, 1).Build();
  for (int i = 0; i < 10'000; ++i) Event(t, i, 0, 1, i == 7777 ? 1'000'000 : i, -1);
  common::Capture capture;
  capture.workers.push_back(std::move(t));
  const MemoryReport r = ComputeMemory(common::CaptureView(capture));
  const DeviceMemory& d = r.workers.at(0).devices.at(0);
  EXPECT_EQ(d.timeline.size(), kMemoryTimelinePoints);
  EXPECT_EQ(d.peak_allocated_bytes, 1'000'000);
  EXPECT_EQ(d.peak_time, 7777);
  EXPECT_TRUE(std::any_of(d.timeline.begin(), d.timeline.end(),
                          [](const MemoryPoint& p) { return p.allocated == 1'000'000; }));
  EXPECT_FALSE(r.nearest_oom.has_value());  // the device's size is unknown
}

}  // namespace
}  // namespace podscope::analysis
