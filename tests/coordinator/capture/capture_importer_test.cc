// The import transaction against a real RocksDB store, without HTTP: what lands, what is
// refused, and that a refusal changes nothing.
#include "coordinator/capture/capture_importer.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/synchronization/mutex.h"
#include "common/time_source.h"
#include "storage/rocksdb_trace_store.h"
#include "storage/trace_store.h"
#include "tests/test_paths.h"

namespace podscope::coordinator {
namespace {

using storage::CaptureRecord;
using storage::CaptureState;

constexpr common::TimeNs kNow = 1'800'000'000'000'000'000;

// A one-rank Kineto trace with two kernels and a CUDA call.
std::string Trace(int rank) {
  return R"json({"distributedInfo": {"rank": )json" + std::to_string(rank) +
         R"json(, "world_size": 8}, "traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 9, "ts": 110, "dur": 5, "args": {"correlation": 3}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 120, "dur": 30, "args": {"device": 0, "stream": 7, "correlation": 3}},
    {"ph": "X", "cat": "kernel", "name": "relu", "pid": 0, "tid": 7, "ts": 160, "dur": 10, "args": {"device": 0, "stream": 7, "correlation": 4}}
  ]})json";
}

class CaptureImporterTest : public ::testing::Test {
 protected:
  CaptureImporterTest() {
    auto store = storage::RocksDbTraceStore::Open({.path = dir_.File("db")});
    EXPECT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    importer_ = std::make_unique<CaptureImporter>(
        *store_, mutations_, limits_,
        [this](const std::string& id) {
          mutations_.AssertHeld();
          forgotten_.push_back(id);
          return absl::OkStatus();
        },
        time_);
  }

  absl::StatusOr<CaptureRecord> Import(const std::string& id, const std::string& contents,
                                       int32_t rank = -1, const std::string& job = "imported") {
    const std::string path = dir_.Write("staged-" + std::to_string(files_++), contents);
    return importer_->Import(
        {.capture_id = id, .job = job, .rank = rank, .name = "r.json", .path = path});
  }

  testing::ScratchDir dir_;
  std::unique_ptr<storage::RocksDbTraceStore> store_;
  absl::Mutex mutations_;
  ImportLimits limits_{.max_ranks_per_capture = 3};
  common::SimulatedTimeSource time_{kNow};
  std::vector<std::string> forgotten_;
  std::unique_ptr<CaptureImporter> importer_;
  int files_ = 0;
};

TEST_F(CaptureImporterTest, ANewCaptureIsCompleteWithItsEventsStored) {
  absl::StatusOr<CaptureRecord> r = Import("", Trace(5));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id.rfind("imp-", 0), 0u) << r->id;
  EXPECT_EQ(r->job, "imported");
  EXPECT_EQ(r->state, CaptureState::kComplete);
  EXPECT_EQ(r->created_ns, kNow);
  EXPECT_EQ(r->generation, 1u);
  ASSERT_EQ(r->workers.size(), 1u);
  EXPECT_EQ(r->workers[0].rank, 5);
  EXPECT_EQ(r->workers[0].source, "r.json");
  EXPECT_EQ(r->events, 3u);
  EXPECT_GT(r->stored_bytes, 0u);
  absl::StatusOr<CaptureRecord> stored = store_->GetCapture(r->id);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, CaptureState::kComplete);
  absl::StatusOr<common::Capture> loaded = storage::LoadCapture(*store_, r->id);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->workers.size(), 1u);
  EXPECT_EQ(loaded->workers[0].kernels.size(), 2u);
  EXPECT_TRUE(forgotten_.empty()) << "a new capture has no cached analyses to drop";
}

TEST_F(CaptureImporterTest, RanksAreAddedToACaptureOnceEach) {
  ASSERT_TRUE(Import("c", Trace(0)).ok());
  absl::StatusOr<CaptureRecord> two = Import("c", Trace(1));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->workers.size(), 2u);
  EXPECT_EQ(two->generation, 2u);
  EXPECT_EQ(forgotten_, std::vector<std::string>{"c"}) << "its cached analyses are stale";
  // The same rank again: refused, nothing changes.
  absl::StatusOr<CaptureRecord> again = Import("c", Trace(1));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find("already has rank 1"), std::string::npos)
      << again.status();
  EXPECT_EQ(store_->GetCapture("c")->workers.size(), 2u);
  // A rank given by the request overrides the file's.
  absl::StatusOr<CaptureRecord> three = Import("c", Trace(1), /*rank=*/2);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->workers.back().rank, 2);
  // Past the limit of ranks per capture.
  absl::StatusOr<CaptureRecord> four = Import("c", Trace(3));
  EXPECT_EQ(four.status().code(), absl::StatusCode::kResourceExhausted) << four.status();
  EXPECT_EQ(store_->GetCapture("c")->workers.size(), 3u);
}

TEST_F(CaptureImporterTest, AMalformedFileLeavesTheStoreUntouchedAndIsNamedAsTheClientsFile) {
  absl::StatusOr<CaptureRecord> r = Import("bad", R"({"traceEvents": [ {"ph": "X", )");
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(r.status().GetPayload(kTraceFileErrorPayload).has_value());
  EXPECT_EQ(r.status().message().find(dir_.path()), std::string::npos) << "the staging path leaked";
  EXPECT_EQ(store_->GetCapture("bad").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CaptureImporterTest, BadNamesAndCapturesStillRunningAreRefused) {
  absl::StatusOr<CaptureRecord> job = Import("", Trace(0), -1, "two\nlines");
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument) << job.status();
  EXPECT_FALSE(job.status().GetPayload(kTraceFileErrorPayload).has_value())
      << "the request's, not the file's";
  EXPECT_EQ(Import("../x", Trace(0)).status().code(), absl::StatusCode::kInvalidArgument);
  CaptureRecord live;
  live.id = "live";
  live.job = "j";
  live.state = CaptureState::kCapturing;
  ASSERT_TRUE(store_->PutCapture(live).ok());
  absl::StatusOr<CaptureRecord> r = Import("live", Trace(0));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(store_->GetCapture("live")->workers.size(), 0u);
}

}  // namespace
}  // namespace podscope::coordinator
