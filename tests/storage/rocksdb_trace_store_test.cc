#include "storage/rocksdb_trace_store.h"

#include <absl/strings/str_format.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include "common/trace_files.h"
#include "storage/retention.h"
#include "tests/common/sample_trace.h"
#include "tests/test_paths.h"

namespace podscope::storage {
namespace {

using podscope::testing::ScratchDir;

std::unique_ptr<RocksDbTraceStore> OpenStore(const std::string& path) {
  absl::StatusOr<std::unique_ptr<RocksDbTraceStore>> store =
      RocksDbTraceStore::Open({.path = path});
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

CaptureRecord Record(const std::string& id, const std::string& job, CaptureState state,
                     int64_t created, uint64_t bytes = 0) {
  CaptureRecord r;
  r.id = id;
  r.job = job;
  r.state = state;
  r.created_ns = created;
  r.updated_ns = created + 1;
  r.stored_bytes = bytes;
  r.workers.push_back(WorkerRecord{0, 3, "node-1", "rank-3.json", 42, 1, "complete"});
  r.workers.back().dropped_events = 14;
  r.workers.back().dropped_reasons = {{"kernels: no time", 11}, {"CUDA calls: no time", 3}};
  return r;
}

TEST(RocksDbTraceStoreTest, CaptureRecordsRoundTripFilterAndPage) {
  ScratchDir dir;
  auto store = OpenStore(dir.File("db"));
  ASSERT_TRUE(store->PutCapture(Record("c1", "jobA", CaptureState::kComplete, 10)).ok());
  ASSERT_TRUE(store->PutCapture(Record("c2", "jobB", CaptureState::kFailed, 20)).ok());
  ASSERT_TRUE(store->PutCapture(Record("c3", "jobA", CaptureState::kImporting, 30)).ok());
  absl::StatusOr<CaptureRecord> c1 = store->GetCapture("c1");
  ASSERT_TRUE(c1.ok());
  EXPECT_EQ(*c1, Record("c1", "jobA", CaptureState::kComplete, 10));
  EXPECT_EQ(store->GetCapture("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->GetCapture("../etc").status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(store->ListCaptures({.job = "jobA"})->size(), 2u);
  EXPECT_EQ(store->ListCaptures({.state = CaptureState::kFailed})->at(0).id, "c2");
  auto page1 = store->ListCaptures({.limit = 2});
  ASSERT_EQ(page1->size(), 2u);
  auto page2 = store->ListCaptures({.after_id = page1->back().id, .limit = 2});
  ASSERT_EQ(page2->size(), 1u);
  EXPECT_EQ(page2->at(0).id, "c3");
}

TEST(RocksDbTraceStoreTest, ChunksStreamBackWorkerByWorkerAndSurviveReopen) {
  ScratchDir dir;
  absl::StatusOr<common::Capture> fixture = common::LoadCapture(
      *common::ExpandTraceInputs({podscope::testing::KinetoFixture("trace_filter")}));
  ASSERT_TRUE(fixture.ok());
  {
    auto store = OpenStore(dir.File("db"));
    CaptureRecord record = Record("cap", "j", CaptureState::kComplete, 1);
    record.workers = {WorkerRecord{0, fixture->workers[0].info.rank},
                      WorkerRecord{1, fixture->workers[1].info.rank}};
    ASSERT_TRUE(store->PutCapture(record).ok());
    // Worker 1 first, and worker 0 in two chunks (kernels, then the rest), to check ordering.
    ASSERT_TRUE(store->PutChunk("cap", 1, 0, fixture->workers[1]).ok());
    common::WorkerTrace kernels_only = fixture->workers[0];
    common::WorkerTrace rest = fixture->workers[0];
    kernels_only.memcpys = {};
    kernels_only.runtime_calls = {};
    kernels_only.host_spans = {};
    kernels_only.collectives = {};
    kernels_only.steps = {};
    rest.kernels = {};
    ASSERT_TRUE(store->PutChunk("cap", 0, 0, kernels_only).ok());
    ASSERT_TRUE(store->PutChunk("cap", 0, 1, rest).ok());
    ASSERT_TRUE(store->PutChunk("cap", 0, 1, rest).ok());  // a resumed upload repeats a chunk
  }
  auto store = OpenStore(dir.File("db"));
  std::vector<uint32_t> order;
  absl::StatusOr<common::Capture> loaded = LoadCapture(*store, "cap");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->workers.size(), 2u);
  podscope::testing::ExpectSameEvents(fixture->workers[0], loaded->workers[0]);
  podscope::testing::ExpectSameEvents(fixture->workers[1], loaded->workers[1]);
  EXPECT_EQ(loaded->workers[1].info.rank, 1);
  absl::StatusOr<uint64_t> bytes = store->ApproximateEventBytes("cap");
  ASSERT_TRUE(bytes.ok());
}

// Streamed readers see the workers a CaptureView of the loaded capture would, one at a time: by
// rank whatever the worker indices, only the chosen ranks, each with its record's clock.
TEST(StoredWorkersTest, VisitsTheRecordsWorkersByRankOneAtATime) {
  ScratchDir dir;
  absl::StatusOr<common::Capture> fixture = common::LoadCapture(
      *common::ExpandTraceInputs({podscope::testing::KinetoFixture("trace_filter")}));
  ASSERT_TRUE(fixture.ok());
  ASSERT_EQ(fixture->workers.size(), 2u);
  auto store = OpenStore(dir.File("db"));
  // Index 0 holds the higher rank; index 2 has chunks but is not in the record (an import cut
  // short): it is not the capture's.
  CaptureRecord record = Record("cap", "j", CaptureState::kComplete, 1);
  common::ClockModel fitted;
  fitted.offset_ns = 12'345;
  fitted.source = common::ClockSource::kNetwork;
  record.workers = {WorkerRecord{0, 7}, WorkerRecord{1, 2}};
  record.workers[0].clock = fitted;
  common::WorkerTrace high = fixture->workers[1], low = fixture->workers[0];
  high.info.rank = 7;
  low.info.rank = 2;
  ASSERT_TRUE(store->PutCapture(record).ok());
  ASSERT_TRUE(store->PutChunk("cap", 0, 0, high).ok());
  ASSERT_TRUE(store->PutChunk("cap", 1, 0, low).ok());
  ASSERT_TRUE(store->PutChunk("cap", 2, 0, low).ok());

  absl::StatusOr<StoredWorkers> workers = StoredWorkers::Open(*store, "cap");
  ASSERT_TRUE(workers.ok()) << workers.status();
  std::vector<int32_t> ranks;
  std::vector<int64_t> offsets;
  ASSERT_TRUE(workers
                  ->ForEachWorker([&](const common::WorkerTrace& trace) {
                    ranks.push_back(trace.info.rank);
                    offsets.push_back(trace.clock.offset_ns);
                    EXPECT_EQ(trace.info.job, "j");  // Kineto files name none: the capture's
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(ranks, (std::vector<int32_t>{2, 7}));
  EXPECT_EQ(offsets[1], 12'345);
  EXPECT_EQ(offsets[0], low.clock.offset_ns);

  workers->KeepRanks({7});
  ranks.clear();
  ASSERT_TRUE(workers
                  ->ForEachWorker([&](const common::WorkerTrace& trace) {
                    ranks.push_back(trace.info.rank);
                    podscope::testing::ExpectSameEvents(high, trace);
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(ranks, (std::vector<int32_t>{7}));

  // A visitor's error stops the pass and comes back as it is.
  int visits = 0;
  workers->KeepRanks({});
  const absl::Status stopped = workers->ForEachWorker([&](const common::WorkerTrace&) {
    ++visits;
    return absl::CancelledError("enough");
  });
  EXPECT_EQ(stopped, absl::CancelledError("enough"));
  EXPECT_EQ(visits, 1);
  EXPECT_EQ(StoredWorkers::Open(*store, "nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(RocksDbTraceStoreTest, DeleteRemovesRecordEventsAndAnalyses) {
  ScratchDir dir;
  auto store = OpenStore(dir.File("db"));
  ASSERT_TRUE(store->PutCapture(Record("a", "j", CaptureState::kComplete, 1)).ok());
  ASSERT_TRUE(store->PutCapture(Record("ab", "j", CaptureState::kComplete, 1)).ok());
  const common::WorkerTrace w = podscope::testing::MakeSampleTrace();
  ASSERT_TRUE(store->PutChunk("a", 0, 0, w).ok());
  ASSERT_TRUE(store->PutChunk("a", 1, 0, w).ok());
  ASSERT_TRUE(store->PutChunk("ab", 0, 0, w).ok());  // shares a prefix with "a"
  ASSERT_TRUE(store->PutAnalysis("a", "steps", "{}").ok());
  EXPECT_EQ(store->GetAnalysis("a", "steps")->value(), "{}");
  EXPECT_FALSE(store->GetAnalysis("a", "pod")->has_value());
  EXPECT_EQ(store->CountCaptureKeysForTesting("a"), 3u);
  ASSERT_TRUE(store->DeleteCapture("a").ok());
  EXPECT_EQ(store->CountCaptureKeysForTesting("a"), 0u);
  EXPECT_EQ(store->GetCapture("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->CountCaptureKeysForTesting("ab"), 1u);
  EXPECT_TRUE(LoadCapture(*store, "ab").ok());
}

TEST(RocksDbTraceStoreTest, DeletingOneWorkersEventsLeavesItsNeighbours) {
  ScratchDir dir;
  auto store = OpenStore(dir.File("db"));
  const common::WorkerTrace w = podscope::testing::MakeSampleTrace();
  for (uint32_t worker : {0u, 1u, 2u, UINT32_MAX}) {
    for (uint64_t sequence : {0u, 1u, 300u})
      ASSERT_TRUE(store->PutChunk("a", worker, sequence, w).ok());
  }
  ASSERT_TRUE(store->PutChunk("ab", 1, 0, w).ok());  // another capture, sharing a prefix
  ASSERT_TRUE(store->DeleteWorkerEvents("a", 1).ok());
  ASSERT_TRUE(store->DeleteWorkerEvents("a", UINT32_MAX).ok());
  std::map<uint32_t, int> chunks;
  ASSERT_TRUE(store
                  ->ReadWorkers("a",
                                [&](uint32_t worker, common::WorkerTrace trace) {
                                  chunks[worker] =
                                      static_cast<int>(trace.Counts().Total() / w.Counts().Total());
                                  return absl::OkStatus();
                                })
                  .ok());
  EXPECT_EQ(chunks, (std::map<uint32_t, int>{{0, 3}, {2, 3}}));
  EXPECT_EQ(store->CountCaptureKeysForTesting("ab"), 1u);
  EXPECT_EQ(store->DeleteWorkerEvents("../x", 0).code(), absl::StatusCode::kInvalidArgument);
}

// A second store on a directory in use is refused in words, not with RocksDB's raw lock error.
TEST(RocksDbTraceStoreTest, ADirectoryInUseIsRefusedInWords) {
  ScratchDir dir;
  auto first = RocksDbTraceStore::Open({.path = dir.File("db")});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = RocksDbTraceStore::Open({.path = dir.File("db")});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(
      second.status().message().find("is in use (another podscope-coordinator running on it?)"),
      std::string::npos)
      << second.status();
}

TEST(RocksDbTraceStoreTest, RefusesForeignDirectoriesAndNewerFormats) {
  ScratchDir dir;
  std::filesystem::create_directories(dir.File("junk"));
  dir.Write("junk/file.txt", "hello");
  auto junk = RocksDbTraceStore::Open({.path = dir.File("junk")});
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(junk.status().message().find("holds no RocksDB store"), std::string::npos)
      << junk.status();
  EXPECT_EQ(RocksDbTraceStore::Open({.path = dir.File("none"), .create_if_missing = false})
                .status()
                .code(),
            absl::StatusCode::kNotFound);

  // A store whose format version is newer, or unreadable, is refused and left as it is.
  for (const auto& [version, code] :
       {std::pair<std::string, absl::StatusCode>{"2", absl::StatusCode::kFailedPrecondition},
        {"abc", absl::StatusCode::kDataLoss}}) {
    const std::string path = dir.File("db-" + version);
    { auto created = OpenStore(path); }
    {
      std::vector<rocksdb::ColumnFamilyDescriptor> families;
      for (const char* name : {"default", "captures", "events", "analyses", "workers"}) {
        families.emplace_back(name, rocksdb::ColumnFamilyOptions());
      }
      std::vector<rocksdb::ColumnFamilyHandle*> handles;
      rocksdb::DB* raw = nullptr;
      ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), path, families, &handles, &raw).ok());
      ASSERT_TRUE(
          raw->Put(rocksdb::WriteOptions(), handles[0], "podscope_format_version", version).ok());
      for (auto* h : handles) raw->DestroyColumnFamilyHandle(h);
      delete raw;
    }
    auto reopened = RocksDbTraceStore::Open({.path = path});
    EXPECT_EQ(reopened.status().code(), code) << version << ": " << reopened.status();
  }
  auto newer = RocksDbTraceStore::Open({.path = dir.File("db-2")});
  EXPECT_NE(newer.status().message().find("written by a newer podscope"), std::string::npos)
      << newer.status();
}

TEST(RetentionTest, DeletesOldAndOverBudgetFinishedCapturesOnly) {
  ScratchDir dir;
  auto store = OpenStore(dir.File("db"));
  ASSERT_TRUE(store->PutCapture(Record("old", "j", CaptureState::kComplete, 100, 500)).ok());
  ASSERT_TRUE(store->PutCapture(Record("running", "j", CaptureState::kImporting, 50, 900)).ok());
  ASSERT_TRUE(store->PutCapture(Record("mid", "j", CaptureState::kPartial, 1000, 300)).ok());
  ASSERT_TRUE(store->PutCapture(Record("new", "j", CaptureState::kComplete, 2000, 200)).ok());
  // Age: older than 1500 ns at now = 2100 -> "old" (created 100) goes; "running" is in flight.
  auto by_age = EnforceRetention(*store, {.max_age_ns = 1500}, 2100);
  ASSERT_TRUE(by_age.ok());
  EXPECT_EQ(by_age->deleted, std::vector<std::string>{"old"});
  EXPECT_EQ(by_age->remaining_bytes, 1400u);
  // Size: 1400 bytes over a 1200-byte budget -> the oldest finished one ("mid") goes.
  auto by_size = EnforceRetention(*store, {.max_total_bytes = 1200}, 2100);
  ASSERT_TRUE(by_size.ok());
  EXPECT_EQ(by_size->deleted, std::vector<std::string>{"mid"});
  EXPECT_EQ(by_size->remaining_bytes, 1100u);
  EXPECT_TRUE(store->GetCapture("running").ok());
}

}  // namespace
}  // namespace podscope::storage

namespace podscope::storage {
namespace {

TEST(RocksDbTraceStoreTest, SettingsSurviveReopenAndNamesAreChecked) {
  ScratchDir dir;
  {
    auto store = OpenStore(dir.File("db"));
    EXPECT_FALSE(store->GetSetting("alert_rules")->has_value());
    ASSERT_TRUE(store->PutSetting("alert_rules", R"({"rules":[]})").ok());
    ASSERT_TRUE(store->PutSetting("alert_rules", R"({"rules":[1]})").ok()) << "replaced";
    EXPECT_EQ(store->PutSetting("../format", "x").code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(store->PutSetting("Big", "x").code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(store->PutSetting("big", std::string((1 << 20) + 1, 'x')).code(),
              absl::StatusCode::kInvalidArgument);
  }
  auto store = OpenStore(dir.File("db"));
  absl::StatusOr<std::optional<std::string>> rules = store->GetSetting("alert_rules");
  ASSERT_TRUE(rules.ok());
  EXPECT_EQ(rules->value_or(""), R"({"rules":[1]})");
}

// The coordinator lists captures (the /metrics scrape, GET /v1/captures) while its capture
// scheduler writes records: RocksDB serves both at once. Under the tsan preset this also checks
// that none of our code touches what the store hands back unsafely.
TEST(RocksDbTraceStoreTest, ListingWhileRecordsAreWrittenSeesEveryEarlierRecordInOrder) {
  ScratchDir dir;
  auto store = OpenStore(dir.File("db"));
  constexpr int kRecords = 300;
  std::atomic<int> written{0};
  std::atomic<bool> writer_failed{false};
  std::jthread writer([&] {  // joins on every way out of the test
    for (int i = 0; i < kRecords; ++i) {
      const std::string id = absl::StrFormat("c%04d", i);
      absl::Status s = store->PutCapture(Record(id, "j", CaptureState::kImporting, i));
      if (s.ok()) s = store->PutCapture(Record(id, "j", CaptureState::kComplete, i, 7));
      if (!s.ok()) {
        ADD_FAILURE() << s;
        writer_failed = true;
        return;
      }
      written.store(i + 1, std::memory_order_release);
    }
  });
  while (!writer_failed) {
    const int before = written.load(std::memory_order_acquire);
    std::vector<std::string> ids;
    CaptureFilter page{.limit = 16};
    while (true) {
      absl::StatusOr<std::vector<CaptureRecord>> batch = store->ListCaptures(page);
      ASSERT_TRUE(batch.ok()) << batch.status();
      if (batch->empty()) break;
      for (const CaptureRecord& r : *batch) ids.push_back(r.id);
      page.after_id = batch->back().id;
    }
    ASSERT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    ASSERT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "an id listed twice";
    ASSERT_GE(ids.size(), static_cast<size_t>(before)) << "a record written before the scan";
    if (before == kRecords) break;
  }
  writer.join();
  absl::StatusOr<std::vector<CaptureRecord>> done =
      store->ListCaptures({.state = CaptureState::kComplete, .limit = 1000});
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->size(), static_cast<size_t>(kRecords));
}

// Writers on many threads at once, as the coordinator's upload, capture and API threads are:
// RocksDB groups concurrent writes and one thread writes the others' batches. Every write lands
// once and none is lost; under TSan this is where a hand-over it cannot see would show.
TEST(RocksDbTraceStoreTest, ConcurrentWritersEachLandEveryWrite) {
  ScratchDir dir;
  auto store = OpenStore(dir.File("db"));
  const common::WorkerTrace w = podscope::testing::MakeSampleTrace();
  constexpr int kThreads = 6;
  constexpr int kRounds = 40;
  {
    std::vector<std::jthread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([&, t] {
        const std::string id = absl::StrFormat("cap-%d", t);
        for (int i = 0; i < kRounds; ++i) {
          EXPECT_TRUE(store->PutCapture(Record(id, "j", CaptureState::kCapturing, i)).ok());
          // Worker 0 keeps its chunks; worker 1's are written and deleted again.
          EXPECT_TRUE(store->PutChunk(id, 0, static_cast<uint64_t>(i), w).ok());
          EXPECT_TRUE(store->PutChunk(id, 1, static_cast<uint64_t>(i), w).ok());
          EXPECT_TRUE(store->DeleteWorkerEvents(id, 1).ok());
          EXPECT_TRUE(store->PutAnalysis(id, "summary", absl::StrFormat("%d", i)).ok());
        }
      });
    }
  }
  for (int t = 0; t < kThreads; ++t) {
    const std::string id = absl::StrFormat("cap-%d", t);
    std::map<uint32_t, uint64_t> events;
    ASSERT_TRUE(store
                    ->ReadWorkers(id,
                                  [&](uint32_t worker, common::WorkerTrace trace) {
                                    events[worker] = trace.Counts().Total();
                                    return absl::OkStatus();
                                  })
                    .ok());
    EXPECT_EQ(events, (std::map<uint32_t, uint64_t>{{0, kRounds * w.Counts().Total()}})) << id;
    absl::StatusOr<std::optional<std::string>> summary = store->GetAnalysis(id, "summary");
    ASSERT_TRUE(summary.ok() && summary->has_value());
    EXPECT_EQ(**summary, absl::StrFormat("%d", kRounds - 1));
    EXPECT_EQ(store->GetCapture(id)->created_ns, kRounds - 1);
  }
}

}  // namespace
}  // namespace podscope::storage
