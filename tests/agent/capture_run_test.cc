#include "agent/capture_run.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <numeric>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "agent/start_timer.h"
#include "common/time_source.h"
#include "tests/common/sample_trace.h"
#include "tests/wait_for.h"

namespace podscope::agent {
namespace {

constexpr TimeNs kClockStart = 1'800'000'000'000'000'000;

// Serves ranks 0 and 1 with the sample trace, split in `pieces` parts.
class FakeCollector : public Collector {
 public:
  explicit FakeCollector(const common::TimeSource& time) : time_(time) {}
  std::string_view name() const override { return "fake"; }
  std::vector<WorkerIdentity> Workers() const override { return {{0}, {1}}; }
  absl::Status Arm(const CaptureWindow& w) override {
    armed_ranks = w.ranks.size();
    return absl::OkStatus();
  }
  absl::Status Start(std::string_view) override {
    ++starts;
    started_at_host = time_.Now();
    return absl::OkStatus();
  }
  absl::Status Stop(std::string_view) override {
    ++stops;
    return absl::OkStatus();
  }
  absl::StatusOr<CollectedWorker> Drain(std::string_view, int32_t rank) override {
    CollectedWorker w;
    w.rank = rank;
    w.actual_start_ns = 10;
    w.actual_stop_ns = 20;
    for (int i = 0; i < pieces; ++i) w.pieces.push_back(testing::MakeSampleTrace());
    if (rank == failing_rank) w.error = "probe lost its buffers";
    return w;
  }
  // With `streams`, every call while started and not stopped hands over one sample trace.
  absl::StatusOr<std::vector<common::WorkerTrace>> TakeRecorded(std::string_view,
                                                                int32_t rank) override {
    std::vector<common::WorkerTrace> out;
    if (streams && starts > stops) {
      out.push_back(testing::MakeSampleTrace());
      out.back().info.rank = rank;
      ++takes;
    }
    return out;
  }
  void Forget(std::string_view) override { ++forgets; }

  bool streams = false;
  std::atomic<int> takes{0};
  int pieces = 1;
  int failing_rank = -1;
  std::atomic<size_t> armed_ranks{0};
  std::atomic<int> starts{0}, stops{0}, forgets{0};
  std::atomic<TimeNs> started_at_host{0};

 private:
  const common::TimeSource& time_;
};

class CaptureRunTest : public ::testing::Test {
 protected:
  v1::CaptureRequest Request(std::vector<int32_t> ranks, int64_t start_in_ns, int64_t duration_ns) {
    v1::CaptureRequest r;
    r.set_capture_id("cap");
    for (int32_t rank : ranks) r.add_ranks(rank);
    r.set_start_agent_ns(clock_.Now() + start_in_ns);
    r.set_duration_ns(duration_ns);
    r.set_sync_exchanges(4);
    r.set_sync_spread_ns(5'000'000);
    return r;
  }
  CaptureRunHooks Hooks() {
    CaptureRunHooks h;
    h.report = [this](const v1::CaptureStatus& s) {
      absl::MutexLock lock(&mu_);
      reports_.push_back(s);
    };
    h.sync_clock = [this](std::string_view reason, int, TimeNs until) {
      absl::MutexLock lock(&mu_);
      syncs_.emplace_back(reason);
      sync_untils_.push_back(until);
    };
    h.upload = [this](const std::vector<const std::string*>& chunks,
                      TimeNs) -> absl::StatusOr<v1::UploadResponse> {
      absl::MutexLock lock(&mu_);
      uploads_.emplace_back();
      during_window_.push_back(collector_.stops == 0);
      for (const std::string* c : chunks) {
        EXPECT_TRUE(uploads_.back().emplace_back().ParseFromString(*c));
      }
      if (uploads_.size() <= failing_uploads_)
        return absl::UnavailableError("coordinator restarting");
      v1::UploadResponse response;
      std::set<int32_t> ranks;
      for (const v1::UploadRequest& c : uploads_.back()) ranks.insert(c.rank());
      if (uploads_.size() != forgetful_upload_) {
        for (int32_t r : ranks) response.add_ranks_complete(r);
      }
      return response;
    };
    return h;
  }
  // Steps simulated time from one wait of the runs (and their start timer) to the next until
  // every run has finished: the runs' jittered sleeps take no real time, and nothing depends on
  // how fast this machine is.
  void RunToEnd(std::initializer_list<const CaptureRun*> runs) {
    const auto all_finished = [&] {
      return std::all_of(runs.begin(), runs.end(),
                         [](const CaptureRun* r) { return r->finished(); });
    };
    while (!all_finished()) {
      ASSERT_TRUE(testing::WaitFor([&] { return all_finished() || time_.Sleepers() > 0; }));
      time_.AdvanceToNextSleeper();
    }
  }
  void WaitFinished(const CaptureRun& run) { RunToEnd({&run}); }
  size_t Reports() {
    absl::MutexLock lock(&mu_);
    return reports_.size();
  }

  common::SimulatedTimeSource time_{kClockStart};
  AgentClock clock_{time_};
  FakeCollector collector_{time_};
  CaptureRunOptions options_{
      .chunk_events = 4, .retry_initial_ns = 1'000'000, .retry_max_ns = 2'000'000};
  absl::Mutex mu_;
  std::vector<v1::CaptureStatus> reports_;
  std::vector<std::string> syncs_;
  std::vector<TimeNs> sync_untils_;
  std::vector<std::vector<v1::UploadRequest>> uploads_;
  std::vector<bool> during_window_;  // per upload: was the collector not yet stopped
  size_t failing_uploads_ = 0;
  // This upload (1 for the first) is answered as by a coordinator that restarted mid-way.
  size_t forgetful_upload_ = 0;
};

TEST_F(CaptureRunTest, ArmsCapturesDrainsAndUploadsThroughAFailure) {
  failing_uploads_ = 1;
  collector_.pieces = 2;
  const TimeNs before = clock_.Now();
  const v1::CaptureRequest request = Request({0, 1}, 30'000'000, 50'000'000);
  CaptureRun run(request, {{0, &collector_}, {1, &collector_}}, "agent-x", clock_, Hooks(),
                 options_);
  run.Begin();
  WaitFinished(run);
  // The burst before the window is over 5 ms (a tenth of the 30 ms lead, at least 5 ms) before
  // the start; the one after has no limit.
  ASSERT_EQ(sync_untils_.size(), 2u);
  EXPECT_EQ(sync_untils_[0], request.start_agent_ns() - 5'000'000);
  EXPECT_EQ(sync_untils_[1], 0);
  EXPECT_GE(clock_.Now() - before, 80'000'000);  // it waited for the start and the whole window
  EXPECT_EQ(collector_.armed_ranks, 2u);
  EXPECT_EQ(collector_.starts, 1);
  EXPECT_EQ(collector_.stops, 1);
  EXPECT_EQ(collector_.forgets, 1);
  EXPECT_EQ(syncs_, (std::vector<std::string>{"before capture", "after capture"}));

  const size_t per_worker = 2 * testing::MakeSampleTrace().Counts().Total();
  const size_t chunks_per_worker = 2 * ((testing::MakeSampleTrace().Counts().Total() + 3) / 4);
  ASSERT_EQ(uploads_.size(), 2u);  // one broken attempt, then everything again
  for (const auto& attempt : uploads_) {
    ASSERT_EQ(attempt.size(), 2 * chunks_per_worker);
    for (size_t i = 0; i < attempt.size(); ++i) {
      const v1::UploadRequest& c = attempt[i];
      EXPECT_EQ(c.agent_id(), "agent-x");
      EXPECT_EQ(c.sequence(), i % chunks_per_worker);
      EXPECT_EQ(c.last(), i % chunks_per_worker == chunks_per_worker - 1);
    }
  }
  const v1::CaptureStatus final_status = run.Status();
  ASSERT_EQ(final_status.workers_size(), 2);
  for (const v1::WorkerCaptureStatus& w : final_status.workers()) {
    EXPECT_EQ(w.phase(), v1::WORKER_PHASE_UPLOADED);
    EXPECT_EQ(w.events(), per_worker);
    EXPECT_EQ(w.chunks(), chunks_per_worker);
  }
  // Status went up at every phase: armed, capturing, collected, then uploaded.
  std::vector<v1::WorkerPhase> phases;
  for (const v1::CaptureStatus& s : reports_) phases.push_back(s.workers(0).phase());
  EXPECT_EQ(phases.front(), v1::WORKER_PHASE_ARMED);
  EXPECT_EQ(phases.back(), v1::WORKER_PHASE_UPLOADED);
  EXPECT_NE(std::find(phases.begin(), phases.end(), v1::WORKER_PHASE_CAPTURING), phases.end());
  EXPECT_NE(std::find(phases.begin(), phases.end(), v1::WORKER_PHASE_COLLECTED), phases.end());
}

TEST_F(CaptureRunTest, CancelBeforeTheStartNeverStartsTheCollector) {
  CaptureRun run(Request({0, 1}, 5'000'000'000, 1'000'000'000),
                 {{0, &collector_}, {1, &collector_}}, "a", clock_, Hooks(), options_);
  run.Begin();
  ASSERT_TRUE(testing::WaitFor([&] { return Reports() > 0; }));  // armed
  run.Cancel("operator said so");
  WaitFinished(run);
  EXPECT_EQ(collector_.starts, 0);
  EXPECT_EQ(collector_.forgets, 1);
  EXPECT_TRUE(uploads_.empty());
  const v1::CaptureStatus status = run.Status();
  for (const v1::WorkerCaptureStatus& w : status.workers()) {
    EXPECT_EQ(w.phase(), v1::WORKER_PHASE_CANCELLED);
    EXPECT_EQ(w.error(), "operator said so");
  }
}

TEST_F(CaptureRunTest, RunsSharingAStartTimerStartTogetherAndFollowAMovedStart) {
  StartTimer timer(time_);
  options_.start_timer = &timer;
  FakeCollector other(time_);
  const v1::CaptureRequest request = Request({0}, 40'000'000, 20'000'000);
  CaptureRun a(request, {{0, &collector_}}, "a", clock_, Hooks(), options_);
  CaptureRun b(request, {{0, &other}}, "b", clock_, Hooks(), options_);
  a.Begin();
  b.Begin();
  // A sharper start for one of them, 10 ms later, before the first one came (simulated time
  // stands still until RunToEnd moves it).
  ASSERT_TRUE(b.MoveStart(request.start_agent_ns() + 10'000'000));
  RunToEnd({&a, &b});
  EXPECT_EQ(collector_.starts, 1);
  EXPECT_EQ(other.starts, 1);
  EXPECT_GE(collector_.started_at_host.load(), clock_.ToHost(request.start_agent_ns()));
  EXPECT_GE(other.started_at_host.load(), clock_.ToHost(request.start_agent_ns() + 10'000'000));
  EXPECT_FALSE(b.MoveStart(request.start_agent_ns()));  // started: too late to move
}

TEST_F(CaptureRunTest, WorkersFailAloneWithTheirReason) {
  collector_.failing_rank = 1;
  // Rank 5 is not served here; rank 1's collector reports an error; rank 0 is fine.
  CaptureRun run(Request({0, 1, 5}, 0, 10'000'000), {{0, &collector_}, {1, &collector_}}, "a",
                 clock_, Hooks(), options_);
  run.Begin();
  WaitFinished(run);
  std::map<int32_t, v1::WorkerCaptureStatus> by_rank;
  const v1::CaptureStatus status = run.Status();
  for (const v1::WorkerCaptureStatus& w : status.workers()) by_rank[w.rank()] = w;
  EXPECT_EQ(by_rank[0].phase(), v1::WORKER_PHASE_UPLOADED);
  EXPECT_EQ(by_rank[1].phase(), v1::WORKER_PHASE_FAILED);
  EXPECT_EQ(by_rank[1].error(), "probe lost its buffers");
  EXPECT_EQ(by_rank[5].phase(), v1::WORKER_PHASE_FAILED);
  EXPECT_EQ(by_rank[5].error(), "rank 5 is not served by agent a");
  for (const v1::UploadRequest& c : uploads_.at(0)) EXPECT_EQ(c.rank(), 0);
}

TEST_F(CaptureRunTest, SpoolBoundFailsWhatDoesNotFit) {
  options_.max_spool_bytes = 100;  // less than one worker's encoded events
  CaptureRun run(Request({0}, 0, 10'000'000), {{0, &collector_}}, "a", clock_, Hooks(), options_);
  run.Begin();
  WaitFinished(run);
  const v1::WorkerCaptureStatus w = run.Status().workers(0);
  EXPECT_EQ(w.phase(), v1::WORKER_PHASE_FAILED);
  EXPECT_NE(w.error().find("upload spool is full"), std::string::npos) << w.error();
  EXPECT_TRUE(uploads_.empty());
}

TEST_F(CaptureRunTest, WhatIsRecordedGoesUpWhileTheWindowRunsAndIsNotSentAgainOnceStored) {
  collector_.streams = true;
  options_.stream_interval_ns = 1'000'000'000;
  failing_uploads_ = 1;  // the first upload in the window breaks: its chunks go with the next
  CaptureRun run(Request({0, 1}, 10'000'000, 3'500'000'000), {{0, &collector_}, {1, &collector_}},
                 "a", clock_, Hooks(), options_);
  run.Begin();
  WaitFinished(run);
  // Taken at 1, 2 and 3 s into the window for each rank; uploaded then, and once after it.
  EXPECT_EQ(collector_.takes, 6);
  ASSERT_EQ(uploads_.size(), 4u);
  EXPECT_EQ(during_window_, (std::vector<bool>{true, true, true, false}));
  const uint64_t sample = testing::MakeSampleTrace().Counts().Total();
  const uint64_t chunks_per_piece = (sample + 3) / 4;
  EXPECT_EQ(uploads_[0].size(), 2 * chunks_per_piece);
  EXPECT_EQ(uploads_[1].size(), 4 * chunks_per_piece);  // the broken attempt's chunks again
  EXPECT_EQ(uploads_[2].size(), 2 * chunks_per_piece);  // only what is new: the rest is stored
  // Each rank's chunks are numbered on from one upload to the next, every one stored once
  // (but for the broken attempt), and only the very last says so.
  std::map<int32_t, std::vector<uint64_t>> sequences;
  std::map<int32_t, int> lasts;
  for (size_t u = 1; u < uploads_.size(); ++u) {
    for (const v1::UploadRequest& c : uploads_[u]) {
      sequences[c.rank()].push_back(c.sequence());
      lasts[c.rank()] += c.last();
      if (c.last()) {
        EXPECT_EQ(u, 3u);
      }
    }
  }
  const v1::CaptureStatus status = run.Status();
  for (const v1::WorkerCaptureStatus& w : status.workers()) {
    std::vector<uint64_t> expected(4 * chunks_per_piece);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(sequences[w.rank()], expected) << "rank " << w.rank();
    EXPECT_EQ(lasts[w.rank()], 1);
    EXPECT_EQ(w.phase(), v1::WORKER_PHASE_UPLOADED);
    EXPECT_EQ(w.events(), 4 * sample);  // three taken in the window, one drained
    EXPECT_EQ(w.chunks(), 4 * chunks_per_piece);
  }
}

TEST_F(CaptureRunTest, AFinalEmptyChunkClosesAWorkerWhoseEventsAllWentUpInTheWindow) {
  collector_.streams = true;
  collector_.pieces = 0;  // the drain finds nothing left
  options_.stream_interval_ns = 1'000'000'000;
  CaptureRun run(Request({0}, 10'000'000, 1'500'000'000), {{0, &collector_}}, "a", clock_, Hooks(),
                 options_);
  run.Begin();
  WaitFinished(run);
  ASSERT_EQ(uploads_.size(), 2u);
  ASSERT_EQ(uploads_[1].size(), 1u);
  const v1::UploadRequest& last = uploads_[1][0];
  EXPECT_TRUE(last.last());
  EXPECT_EQ(last.sequence(), uploads_[0].size());
  EXPECT_EQ(last.chunk().worker().rank(), 0);  // described like the rest
  EXPECT_EQ(run.Status().workers(0).phase(), v1::WORKER_PHASE_UPLOADED);
}

TEST_F(CaptureRunTest, ACoordinatorThatLostWhatItStoredInTheWindowIsSentEverythingAgain) {
  collector_.streams = true;
  options_.stream_interval_ns = 1'000'000'000;
  forgetful_upload_ = 2;  // the one after the window: the rank is not complete
  CaptureRun run(Request({0}, 10'000'000, 1'500'000'000), {{0, &collector_}}, "a", clock_, Hooks(),
                 options_);
  run.Begin();
  WaitFinished(run);
  ASSERT_EQ(uploads_.size(), 3u);
  EXPECT_EQ(during_window_, (std::vector<bool>{true, false, false}));
  // The third holds what the first stored during the window and what the second sent.
  EXPECT_EQ(uploads_[2].size(), uploads_[0].size() + uploads_[1].size());
  EXPECT_EQ(uploads_[2].front().sequence(), 0u);
  EXPECT_TRUE(uploads_[2].back().last());
  EXPECT_EQ(run.Status().workers(0).phase(), v1::WORKER_PHASE_UPLOADED);
}

}  // namespace
}  // namespace podscope::agent
