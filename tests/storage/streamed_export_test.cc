// A capture read from the store one worker at a time exports and reports, byte for byte, as the
// whole capture in memory does: exports with and without filters, and every report computed
// worker by worker, as JSON and as tables.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/analysis_run.h"
#include "analysis/report/report_json.h"
#include "analysis/report/report_table.h"
#include "common/capture_filter.h"
#include "common/chrome/chrome_exporter.h"
#include "common/status_macros.h"
#include "common/trace_files.h"
#include "common/trace_slice.h"
#include "sim/workload_model.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/common/sample_trace.h"
#include "tests/test_paths.h"

namespace podscope::storage {
namespace {

using podscope::testing::ScratchDir;

absl::StatusOr<std::string> Export(common::WorkerSource& workers) {
  std::string out;
  ASSIGN_OR_RETURN(common::ExportStats stats,
                   common::WriteChromeTrace(workers, {}, [&out](std::string_view piece) {
                     out.append(piece);
                     return absl::OkStatus();
                   }));
  EXPECT_EQ(stats.bytes, out.size());
  return out;
}

class StreamedExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::WorkloadOptions o;
    ASSERT_TRUE(sim::ApplyPreset("light", &o).ok());
    o.ranks = 16;
    o.ranks_per_host = 4;
    o.steps = 6;
    o.clock_offset_ms = 3;
    o.drift_ppm = 20;
    o.slowdowns.push_back({.rank = 5, .factor = 1.3});  // a straggler, for its cause and cost
    job_ = sim::SimulateJob(o).capture;
    absl::StatusOr<std::unique_ptr<RocksDbTraceStore>> store =
        RocksDbTraceStore::Open({.path = dir_.File("db")});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    CaptureRecord record;
    record.id = "cap";
    record.job = job_.job;
    record.state = CaptureState::kComplete;
    // Worker indices in reverse rank order, each worker in several chunks, and every third
    // worker with a fitted clock model in its record (a live capture's), which wins.
    const auto n = static_cast<uint32_t>(job_.workers.size());
    for (uint32_t r = 0; r < n; ++r) {
      common::WorkerTrace& w = job_.workers[r];
      const uint32_t index = n - 1 - r;
      WorkerRecord worker{index, w.info.rank};
      if (r % 3 == 0) {
        worker.clock.offset_ns = 1'000'000 + r * 1'000;
        worker.clock.drift_ppb = -5'000;
        worker.clock.error_bound_ns = 800;
        worker.clock.source = common::ClockSource::kNetwork;
        w.clock = worker.clock;
      }
      record.workers.push_back(worker);
      uint64_t sequence = 0;
      for (const common::WorkerTrace& chunk : common::SplitIntoChunks(w, 5'000))
        ASSERT_TRUE(store_->PutChunk("cap", index, sequence++, chunk).ok());
    }
    ASSERT_TRUE(store_->PutCapture(record).ok());
  }

  // Streamed from the store, as the REST API's trace export reads it.
  absl::StatusOr<std::string> Streamed(const common::CaptureFilterSpec& spec) {
    ASSIGN_OR_RETURN(StoredWorkers stored, StoredWorkers::Open(*store_, "cap"));
    ASSIGN_OR_RETURN(common::EventFilter filter, common::EventFilter::Parse(spec));
    stored.KeepRanks(filter.ranks());
    common::FilteredWorkers workers(stored, std::move(filter));
    return Export(workers);
  }

  // The whole capture in memory, filtered as `podscope export` filters it.
  std::string InMemory(common::Capture capture, const common::CaptureFilterSpec& spec) {
    EXPECT_TRUE(common::FilterCapture(spec, &capture).ok());
    const common::CaptureView view(capture);
    common::ViewWorkers workers(view);
    absl::StatusOr<std::string> out = Export(workers);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : "";
  }

  ScratchDir dir_;
  common::Capture job_;
  std::unique_ptr<RocksDbTraceStore> store_;
};

TEST_F(StreamedExportTest, EqualsTheInMemoryExportByteForByte) {
  absl::StatusOr<common::Capture> loaded = LoadCapture(*store_, "cap");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->workers.size(), 16u);
  const common::CaptureFilterSpec specs[] = {
      {},
      {.ranks = "3-5,9"},
      {.steps = "2-3"},
      {.window = "40ms-250ms"},
      {.ranks = "0,7-12", .steps = "1-4", .window = "100ms-400ms"},
  };
  for (const common::CaptureFilterSpec& spec : specs) {
    SCOPED_TRACE(spec.ranks + " " + spec.steps + " " + spec.window);
    absl::StatusOr<std::string> streamed = Streamed(spec);
    ASSERT_TRUE(streamed.ok()) << streamed.status();
    // Against the capture as simulated (no store in between) and as loaded whole.
    EXPECT_TRUE(*streamed == InMemory(job_, spec));
    EXPECT_TRUE(*streamed == InMemory(*loaded, spec));
    EXPECT_GT(streamed->size(), 10'000u);
  }
}

TEST_F(StreamedExportTest, AFilterThatKeepsNothingIsNamed) {
  EXPECT_EQ(Streamed({.ranks = "40-41"}).status(),
            absl::NotFoundError("no input holds ranks 40-41"));
  EXPECT_EQ(Streamed({.steps = "90"}).status(),
            absl::NotFoundError("rank 0 has no step 90 (its markers)"));
  EXPECT_EQ(Streamed({.window = "2s-1s"}).status().code(), absl::StatusCode::kInvalidArgument);
}

// Every report that runs worker by worker, alone and together, on the simulated job and on a real
// multi-rank trace (with allocator events), equals the whole capture's analysis.
TEST_F(StreamedExportTest, ReportsReadWorkerByWorkerEqualTheWholeCapturesByteForByte) {
  absl::StatusOr<common::Capture> real = common::LoadCapture(
      *common::ExpandTraceInputs({podscope::testing::KinetoFixture("trace_filter")}));
  ASSERT_TRUE(real.ok()) << real.status();
  CaptureRecord record;
  record.id = "real";
  record.job = "real";
  record.state = CaptureState::kComplete;
  for (uint32_t i = 0; i < real->workers.size(); ++i) {
    record.workers.push_back(WorkerRecord{i, real->workers[i].info.rank});
    ASSERT_TRUE(store_->PutChunk("real", i, 0, real->workers[i]).ok());
  }
  ASSERT_TRUE(store_->PutCapture(record).ok());
  // And a hand-made one with allocator events.
  record.id = "sample";
  record.workers.clear();
  for (uint32_t i = 0; i < 3; ++i) {
    common::WorkerTrace w = podscope::testing::MakeSampleTrace();
    w.info.rank = static_cast<int32_t>(2 - i);
    record.workers.push_back(WorkerRecord{i, w.info.rank});
    ASSERT_TRUE(store_->PutChunk("sample", i, 0, w).ok());
  }
  ASSERT_TRUE(store_->PutCapture(record).ok());

  using analysis::AnalysisRequest;
  std::vector<AnalysisRequest> requests;
  for (std::string_view report : analysis::kReportNames)
    requests.push_back({.reports = {std::string(report)}});
  requests.push_back({.reports = {"all"}});
  requests.push_back({.reports = {"temporal", "gpu", "pod", "steps"},
                      .window = analysis::WindowMode::kHta,
                      .top_kernels = 3,
                      .first_step = 2,
                      .last_step = 4,
                      .ranks = {1, 3},
                      .top_workers = 1,
                      .workers_only = true});
  size_t memory_workers = 0, stragglers_costed = 0;
  for (const char* id : {"cap", "real", "sample"}) {
    absl::StatusOr<common::Capture> loaded = LoadCapture(*store_, id);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const common::CaptureView whole(*loaded);
    for (AnalysisRequest request : requests) {
      ASSERT_TRUE(analysis::ValidateRequest(&request).ok());
      SCOPED_TRACE(std::string(id) + " " + request.reports[0]);
      absl::StatusOr<StoredWorkers> stored = StoredWorkers::Open(*store_, id);
      ASSERT_TRUE(stored.ok());
      common::Capture described;
      absl::StatusOr<analysis::AnalysisResults> streamed =
          analysis::RunAnalysesByWorker(*stored, request, &described);
      ASSERT_TRUE(streamed.ok()) << streamed.status();
      // What the cross-worker reports gathered: each worker's collectives and host samples alone.
      ASSERT_EQ(described.workers.size(), loaded->workers.size());
      for (size_t w = 0; w < described.workers.size(); ++w) {
        const common::EventCounts counts = described.workers[w].Counts();
        EXPECT_EQ(counts.Total(), counts.collectives + counts.host_samples);
        EXPECT_EQ(counts.collectives, loaded->workers[w].collectives.size());
      }
      const common::CaptureView by_worker(described);
      const analysis::AnalysisResults in_memory = analysis::RunAnalyses(whole, request);
      const std::string json = analysis::RenderJson(by_worker, request, *streamed);
      EXPECT_TRUE(json == analysis::RenderJson(whole, request, in_memory)) << json.substr(0, 500);
      EXPECT_TRUE(analysis::RenderTables(by_worker, request, *streamed) ==
                  analysis::RenderTables(whole, request, in_memory));
      EXPECT_GT(json.size(), 40u);
      if (streamed->memory) memory_workers += streamed->memory->workers.size();
      if (streamed->stragglers) {
        for (const analysis::Straggler& s : streamed->stragglers->stragglers)
          stragglers_costed += s.step_time_loss_ns.has_value() && !s.evidence.top.empty();
      }
    }
  }
  EXPECT_GT(memory_workers, 0u) << "the allocator events were reported";
  EXPECT_GT(stragglers_costed, 0u) << "a straggler's cause and cost were compared";
}

// A source whose workers change between passes (a capture deleted and made again meanwhile).
class ChangingWorkers final : public common::WorkerSource {
 public:
  ChangingWorkers(const common::Capture& first, const common::Capture& later)
      : first_(first), later_(later) {}
  absl::Status ForEachWorker(
      const std::function<absl::Status(const common::WorkerTrace&)>& visit) override {
    const common::CaptureView view(passes_++ == 0 ? first_ : later_);
    common::ViewWorkers workers(view);
    return workers.ForEachWorker(visit);
  }

 private:
  const common::Capture& first_;
  const common::Capture& later_;
  int passes_ = 0;
};

// A later pass that meets other workers than the first (other collectives, other ranks) is an
// error to try again, never a report mixing the two; a capture of two jobs is refused after the
// first pass unless insisted on.
TEST_F(StreamedExportTest, WorkersThatChangeBetweenPassesOrAreNotOneJobAreRefused) {
  common::Capture fewer = job_;
  for (common::WorkerTrace& w : fewer.workers) {
    w.collectives = common::CollectiveTable();
  }
  analysis::AnalysisRequest request{.reports = {"steps"}};
  ASSERT_TRUE(analysis::ValidateRequest(&request).ok());
  common::Capture tables;
  ChangingWorkers changing(job_, fewer);
  absl::StatusOr<analysis::AnalysisResults> results =
      analysis::RunAnalysesByWorker(changing, request, &tables);
  EXPECT_EQ(results.status().code(), absl::StatusCode::kUnavailable) << results.status();

  common::Capture two_jobs = job_;
  two_jobs.workers[3].info.job = "other";
  ChangingWorkers mixed(two_jobs, two_jobs);
  results = analysis::RunAnalysesByWorker(mixed, request, &tables);
  EXPECT_EQ(results.status().code(), absl::StatusCode::kFailedPrecondition) << results.status();
  EXPECT_NE(results.status().message().find("not one job"), std::string::npos);
  request.allow_mixed = true;
  ChangingWorkers insisted(two_jobs, two_jobs);
  EXPECT_TRUE(analysis::RunAnalysesByWorker(insisted, request, &tables).ok());
}

}  // namespace
}  // namespace podscope::storage
