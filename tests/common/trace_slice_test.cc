#include "common/trace_slice.h"

#include <gtest/gtest.h>

#include <limits>

#include "common/chunk_codec.h"
#include "podscope/v1/trace.pb.h"
#include "tests/common/sample_trace.h"

namespace podscope::common {
namespace {

WorkerTrace Kernels(std::initializer_list<std::pair<TimeNs, TimeNs>> spans) {
  WorkerTrace w;
  const NameId name = w.strings.Intern("k");
  for (auto [s, e] : spans) {
    w.kernels.start.push_back(s);
    w.kernels.end.push_back(e);
    w.kernels.device.push_back(0);
    w.kernels.stream.push_back(7);
    w.kernels.name.push_back(name);
    w.kernels.correlation.push_back(s);
    for (auto* c : {&w.kernels.grid_x, &w.kernels.grid_y, &w.kernels.grid_z, &w.kernels.block_x,
                    &w.kernels.block_y, &w.kernels.block_z}) {
      c->push_back(1);
    }
    w.kernels.registers_per_thread.push_back(0);
    w.kernels.shared_memory_bytes.push_back(0);
    w.kernels.kernel_class.push_back(KernelClass::kCompute);
  }
  return w;
}

TEST(TraceSliceTest, KeepWindowKeepsOnlyWhollyInsideEvents) {
  WorkerTrace w = Kernels({{0, 10}, {10, 20}, {15, 30}, {20, 25}, {25, 40}});
  KeepWindow(10, 30, &w);
  EXPECT_EQ(w.kernels.start, (std::vector<TimeNs>{10, 15, 20}));
  EXPECT_EQ(w.kernels.end, (std::vector<TimeNs>{20, 30, 25}));
  EXPECT_EQ(w.kernels.correlation,
            (std::vector<int64_t>{10, 15, 20}));  // every column moves together
  EXPECT_TRUE(w.Validate().ok());
}

TEST(TraceSliceTest, KeepWindowOnEveryTable) {
  WorkerTrace w = testing::MakeSampleTrace();
  const auto [first, last] = w.TimeRange();
  WorkerTrace all = w;
  KeepWindow(0, std::numeric_limits<TimeNs>::max(), &all);
  EXPECT_EQ(all.Counts(), w.Counts());  // all of time keeps everything
  WorkerTrace device_and_host = w;
  KeepWindow(first, last, &device_and_host);
  EXPECT_EQ(device_and_host.kernels.size(), w.kernels.size());
  EXPECT_EQ(device_and_host.host_spans.size(), w.host_spans.size());
  KeepWindow(last + 1, last + 2, &w);
  EXPECT_EQ(w.Counts().Total(), 0u);
}

TEST(TraceSliceTest, MapTimesShiftsEveryTimestamp) {
  WorkerTrace w = testing::MakeSampleTrace();
  const WorkerTrace before = w;
  MapTimes(ClockModel{.offset_ns = 1000}, &w);
  EXPECT_EQ(w.kernels.start[0], before.kernels.start[0] + 1000);
  EXPECT_EQ(w.collectives.kernel_end[0], before.collectives.kernel_end[0] + 1000);
  EXPECT_EQ(w.steps.start[0], before.steps.start[0] + 1000);
  EXPECT_EQ(w.host_samples.time[0], before.host_samples.time[0] + 1000);
  MapTimes(ClockModel{.offset_ns = -1000}, &w);
  testing::ExpectSameEvents(w, before);
}

TEST(TraceSliceTest, SplitIntoChunksRespectsTheLimitAndLosesNothing) {
  const WorkerTrace w = testing::MakeSampleTrace();
  const size_t total = w.Counts().Total();
  ASSERT_GT(total, 5u);
  std::vector<WorkerTrace> chunks = SplitIntoChunks(w, 2);
  EXPECT_EQ(chunks.size(), (total + 1) / 2);
  // Each chunk decodes on its own; appended back together they are the original.
  WorkerTrace joined;
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_LE(chunks[i].Counts().Total(), 2u);
    EXPECT_TRUE(chunks[i].Validate().ok());
    EXPECT_EQ(chunks[i].info.rank, w.info.rank);
    v1::TraceChunk proto;
    EncodeChunk(chunks[i], ChunkHeader{"c", 0, i}, &proto);
    ASSERT_TRUE(AppendChunk(proto, &joined).ok());
  }
  joined.SortByTime();
  WorkerTrace sorted = w;
  sorted.SortByTime();
  testing::ExpectSameEvents(joined, sorted);
}

TEST(TraceSliceTest, SplitKeepsAnEmptyTraceAsOneChunk) {
  WorkerTrace w;
  w.info.rank = 3;
  std::vector<WorkerTrace> chunks = SplitIntoChunks(w, 100);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].info.rank, 3);
}

// One chunk at a time, as the agent spools them: the same chunks, the given limit, the visitor's
// first error ends it.
TEST(TraceSliceTest, ForEachChunkHandsOutTheSameChunksOneAtATime) {
  const WorkerTrace w = testing::MakeSampleTrace();
  for (size_t limit : {size_t{1}, size_t{3}, w.Counts().Total(), w.Counts().Total() + 10}) {
    const std::vector<WorkerTrace> split = SplitIntoChunks(w, limit);
    size_t i = 0;
    ASSERT_TRUE(ForEachChunk(w, limit, [&](WorkerTrace chunk) {
                  EXPECT_LT(i, split.size());
                  // A chunk of one row names at most what a collective row does (4 names).
                  if (limit == 1) {
                    EXPECT_LE(chunk.strings.size(), 5u);
                  }
                  if (i < split.size()) {
                    EXPECT_EQ(chunk.Counts(), split[i].Counts());
                    testing::ExpectSameEvents(chunk, split[i]);
                  }
                  ++i;
                  return absl::OkStatus();
                }).ok());
    EXPECT_EQ(i, split.size()) << "limit " << limit;
  }
  size_t visited = 0;
  const absl::Status stopped = ForEachChunk(w, 1, [&](WorkerTrace) {
    return ++visited == 2 ? absl::CancelledError("enough") : absl::OkStatus();
  });
  EXPECT_EQ(stopped.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(visited, 2u);
  size_t empty_chunks = 0;
  ASSERT_TRUE(ForEachChunk(WorkerTrace(), 5, [&](WorkerTrace chunk) {
                empty_chunks += chunk.Counts().Total() == 0;
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(empty_chunks, 1u);
}

}  // namespace
}  // namespace podscope::common
