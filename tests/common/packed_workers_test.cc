#include "common/packed_workers.h"

#include <gtest/gtest.h>

#include "common/chunk_codec.h"
#include "common/trace_files.h"
#include "tests/common/sample_trace.h"
#include "tests/test_paths.h"

namespace podscope::common {
namespace {

using podscope::testing::ExpectSameEvents;
using podscope::testing::MakeSampleTrace;

TEST(PackedWorkersTest, AWorkerUnpacksAsItWasPackedWhateverItsChunks) {
  const WorkerTrace original = MakeSampleTrace();
  for (size_t chunk_events : {size_t{1}, size_t{2}, size_t{1} << 18}) {
    const PackedWorker packed = PackWorker(original, chunk_events);
    EXPECT_EQ(packed.rank, original.info.rank);
    EXPECT_EQ(packed.events, original.Counts().Total());
    absl::StatusOr<WorkerTrace> unpacked = UnpackWorker(packed);
    ASSERT_TRUE(unpacked.ok()) << unpacked.status();
    ExpectSameEvents(original, *unpacked);
    EXPECT_EQ(unpacked->info.host, original.info.host);
    EXPECT_EQ(unpacked->info.devices, original.info.devices);
    EXPECT_EQ(unpacked->clock, original.clock);
    EXPECT_TRUE(unpacked->Validate().ok());
  }
  EXPECT_GT(PackWorker(original, 1).chunks.size(), 1u);
}

TEST(PackedWorkersTest, ARealRankPacksFarSmallerThanItsEncodedChunk) {
  KinetoImporter importer;
  absl::StatusOr<ImportResult> imported =
      importer.ImportFile(podscope::testing::KinetoFixture("dlrm_8rank/rank-0.json.gz"));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const WorkerTrace& original = imported->workers.at(0);
  const PackedWorker packed = PackWorker(original);
  absl::StatusOr<WorkerTrace> unpacked = UnpackWorker(packed);
  ASSERT_TRUE(unpacked.ok()) << unpacked.status();
  ExpectSameEvents(original, *unpacked);
  EXPECT_LT(packed.bytes(), EncodeChunkToBytes(original, {}).size() / 2);
}

TEST(PackedWorkersTest, WorkersAreVisitedByRankTiesInTheOrderAdded) {
  PackedWorkers workers;
  for (int32_t rank : {2, 0, 2, 1}) {
    WorkerTrace t = MakeSampleTrace();
    t.info.rank = rank;
    t.info.host = "added-" + std::to_string(workers.size());
    workers.Add(PackWorker(t));
  }
  std::vector<std::string> seen;
  ASSERT_TRUE(workers
                  .ForEachWorker([&](const WorkerTrace& t) {
                    seen.push_back(std::to_string(t.info.rank) + "@" + t.info.host);
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"0@added-1", "1@added-3", "2@added-0", "2@added-2"}));
  // A rank given when loaded (a file without one gets its position) is the one visited.
  workers.mutable_workers()[1].rank = 7;
  int32_t last = -1;
  ASSERT_TRUE(workers
                  .ForEachWorker([&](const WorkerTrace& t) {
                    last = t.info.rank;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(last, 7);
}

TEST(PackedWorkersTest, BytesThatAreNotAPackedWorkerAreDataLoss) {
  PackedWorker packed = PackWorker(MakeSampleTrace());
  PackedWorker truncated = packed;
  truncated.chunks[0].resize(truncated.chunks[0].size() / 2);
  EXPECT_EQ(UnpackWorker(truncated).status().code(), absl::StatusCode::kDataLoss);
  PackedWorker garbage = packed;
  garbage.chunks[0] = "not zstd at all";
  EXPECT_EQ(UnpackWorker(garbage).status().code(), absl::StatusCode::kDataLoss);
  PackedWorkers workers;
  workers.Add(garbage);
  EXPECT_EQ(workers.ForEachWorker([](const WorkerTrace&) { return absl::OkStatus(); }).code(),
            absl::StatusCode::kDataLoss);
}

TEST(PackedWorkersTest, PackedFilesKeepTheLoadersRanksAndItsRefusals) {
  const std::string dir = podscope::testing::SharedDataDir() + "/kineto/dlrm_8rank";
  absl::StatusOr<std::vector<std::string>> files = ExpandTraceInputs({dir});
  ASSERT_TRUE(files.ok()) << files.status();
  absl::StatusOr<Capture> whole = LoadCapture(*files);
  absl::StatusOr<PackedWorkers> packed = LoadPackedWorkers(*files);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_EQ(packed->size(), whole->workers.size());
  const CaptureView view(*whole);
  size_t i = 0;
  ASSERT_TRUE(packed
                  ->ForEachWorker([&](const WorkerTrace& t) {
                    EXPECT_EQ(t.info.rank, view.workers()[i]->info.rank);
                    ExpectSameEvents(*view.workers()[i], t);
                    ++i;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(i, whole->workers.size());
  // The same file twice is one rank twice: refused, naming both.
  absl::StatusOr<PackedWorkers> twice = LoadPackedWorkers({(*files)[0], (*files)[0]});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("appears in both"), std::string::npos) << twice.status();
}

}  // namespace
}  // namespace podscope::common
