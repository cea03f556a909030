#include "coordinator/capture/capture_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <optional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/chunk_codec.h"
#include "common/time_source.h"
#include "podscope/v1/trace.pb.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/common/sample_trace.h"
#include "tests/test_paths.h"
#include "tests/wait_for.h"

namespace podscope::coordinator {
namespace {

constexpr TimeNs kStart = 1'795'000'000'000'000'000;

// Records what the coordinator sends to one agent.
class FakeLink : public AgentControlStream {
 public:
  bool Send(const v1::CoordinatorMessage& m) override {
    absl::MutexLock lock(&mu);
    sent.push_back(m);
    return up;
  }
  void Close() override { up = false; }
  std::vector<v1::CoordinatorMessage> Sent() {
    absl::MutexLock lock(&mu);
    return sent;
  }
  absl::Mutex mu;
  std::vector<v1::CoordinatorMessage> sent ABSL_GUARDED_BY(mu);
  std::atomic<bool> up{true};
};

// The real store, whose next PutCapture can be held open once armed: what the scheduler's loop
// does while it has released its lock to write a record.
class HeldStore : public storage::TraceStore {
 public:
  explicit HeldStore(storage::TraceStore& store) : store_(store) {}

  void HoldNextPut() { Arm(put_); }
  bool Holding() { return IsHolding(put_); }
  void Release() { Open(put_); }
  // The same for the next chunk written.
  void HoldNextChunk() { Arm(chunk_); }
  bool HoldingChunk() { return IsHolding(chunk_); }
  void ReleaseChunk() { Open(chunk_); }

  absl::Status PutCapture(const storage::CaptureRecord& record) override {
    Pass(put_);
    return store_.PutCapture(record);
  }
  absl::StatusOr<storage::CaptureRecord> GetCapture(std::string_view id) override {
    return store_.GetCapture(id);
  }
  absl::StatusOr<std::vector<storage::CaptureRecord>> ListCaptures(
      const storage::CaptureFilter& filter) override {
    return store_.ListCaptures(filter);
  }
  absl::Status PutChunk(std::string_view capture_id, uint32_t worker_index, uint64_t sequence,
                        const common::WorkerTrace& chunk) override {
    Pass(chunk_);
    return store_.PutChunk(capture_id, worker_index, sequence, chunk);
  }
  absl::Status ReadWorkers(
      std::string_view capture_id,
      const std::function<absl::Status(uint32_t, common::WorkerTrace)>& visit) override {
    return store_.ReadWorkers(capture_id, visit);
  }
  absl::Status ReadWorker(std::string_view capture_id, uint32_t worker_index,
                          const std::function<absl::Status(common::WorkerTrace)>& visit) override {
    return store_.ReadWorker(capture_id, worker_index, visit);
  }
  absl::Status PutAnalysis(std::string_view capture_id, std::string_view kind,
                           std::string_view value) override {
    return store_.PutAnalysis(capture_id, kind, value);
  }
  absl::StatusOr<std::optional<std::string>> GetAnalysis(std::string_view capture_id,
                                                         std::string_view kind) override {
    return store_.GetAnalysis(capture_id, kind);
  }
  absl::Status DeleteAnalysis(std::string_view capture_id, std::string_view kind) override {
    return store_.DeleteAnalysis(capture_id, kind);
  }
  absl::Status ForEachAnalysis(
      const std::function<void(std::string_view, std::string_view, uint64_t)>& visit) override {
    return store_.ForEachAnalysis(visit);
  }
  absl::Status PutSetting(std::string_view name, std::string_view value) override {
    return store_.PutSetting(name, value);
  }
  absl::StatusOr<std::optional<std::string>> GetSetting(std::string_view name) override {
    return store_.GetSetting(name);
  }
  absl::Status DeleteCapture(std::string_view id) override { return store_.DeleteCapture(id); }
  absl::Status DeleteWorkerEvents(std::string_view capture_id, uint32_t worker_index) override {
    return store_.DeleteWorkerEvents(capture_id, worker_index);
  }
  absl::StatusOr<uint64_t> ApproximateEventBytes(std::string_view capture_id) override {
    return store_.ApproximateEventBytes(capture_id);
  }

 private:
  storage::TraceStore& store_;
  absl::Mutex mu_;
  // One write held: armed by the test, held by the next write until the test opens it.
  struct Gate {
    bool armed = false, holding = false, released = false;
  };
  void Arm(Gate& gate) {
    absl::MutexLock lock(&mu_);
    gate.armed = true;
  }
  bool IsHolding(const Gate& gate) {
    absl::MutexLock lock(&mu_);
    return gate.holding;
  }
  void Open(Gate& gate) {
    absl::MutexLock lock(&mu_);
    gate.released = true;
  }
  void Pass(Gate& gate) {
    absl::MutexLock lock(&mu_);
    if (!gate.armed) return;
    gate.armed = false;
    gate.holding = true;
    mu_.Await(absl::Condition(&gate.released));
    gate.holding = false;
  }
  // Read and written under mu_ only (by the helpers above, which the analysis cannot follow
  // through a reference).
  Gate put_;
  Gate chunk_;
};

class CaptureSchedulerTest : public ::testing::Test {
 protected:
  CaptureSchedulerTest() : registry_({}, time_) {
    auto store = storage::RocksDbTraceStore::Open({.path = dir_.File("db")});
    EXPECT_TRUE(store.ok());
    store_ = *std::move(store);
    options_.capture_grace_ns = 2'000'000'000;
    options_.upload_timeout_ns = 10'000'000'000;
    options_.flush_interval_ns = 0;
  }
  void MakeScheduler() {
    scheduler_ = std::make_unique<CaptureScheduler>(*store_, registry_, aligner_, options_, time_);
  }

  // An agent serving `ranks` of job "j" whose clock runs `offset` ns ahead of the coordinator's.
  std::shared_ptr<FakeLink> Connect(const std::string& id, std::vector<int32_t> ranks,
                                    std::optional<int64_t> offset) {
    v1::AgentHello hello;
    hello.set_agent_id(id);
    hello.set_host("host-" + id);
    for (int32_t r : ranks) {
      v1::WorkerDescriptor* w = hello.add_workers();
      w->set_rank(r);
      w->set_job("j");
    }
    auto link = std::make_shared<FakeLink>();
    EXPECT_TRUE(registry_.Connected(hello, "peer", link).ok());
    if (offset) {
      const TimeNs t = time_.Now();
      const std::vector<ClockSample> s = {
          {t + *offset, t + 10'000, t + 11'000, t + 21'000 + *offset}};
      aligner_.AddSamples(id, s);
    }
    return link;
  }

  static v1::CaptureStatus Status(const std::string& capture, std::vector<int32_t> ranks,
                                  v1::WorkerPhase phase, TimeNs start = 0, TimeNs stop = 0,
                                  uint64_t chunks = 0) {
    v1::CaptureStatus s;
    s.set_capture_id(capture);
    for (int32_t r : ranks) {
      v1::WorkerCaptureStatus* w = s.add_workers();
      w->set_rank(r);
      w->set_phase(phase);
      w->set_actual_start_ns(start);
      w->set_actual_stop_ns(stop);
      w->set_chunks(chunks);
      w->set_events(chunks * 10);
    }
    return s;
  }

  static v1::UploadRequest Chunk(const std::string& capture, const std::string& agent, int32_t rank,
                                 uint64_t seq, bool last) {
    v1::UploadRequest r;
    r.set_capture_id(capture);
    r.set_agent_id(agent);
    r.set_rank(rank);
    r.set_sequence(seq);
    r.set_last(last);
    common::WorkerTrace trace = testing::MakeSampleTrace();
    trace.info.rank = rank;
    common::EncodeChunk(trace, common::ChunkHeader{capture, 0, seq}, r.mutable_chunk());
    return r;
  }

  storage::CaptureRecord WaitForState(const std::string& id, storage::CaptureState state) {
    storage::CaptureRecord found;
    if (testing::WaitFor([&] {
          absl::StatusOr<storage::CaptureRecord> r = store_->GetCapture(id);
          if (r.ok() && r->state == state) found = *r;
          return r.ok() && r->state == state;
        })) {
      return found;
    }
    ADD_FAILURE() << "capture " << id << " never reached " << storage::CaptureStateName(state);
    return {};
  }

  testing::ScratchDir dir_;
  std::unique_ptr<storage::RocksDbTraceStore> store_;
  common::SimulatedTimeSource time_{kStart};
  AgentRegistry registry_;
  ClockAligner aligner_;
  SchedulerOptions options_;
  std::unique_ptr<CaptureScheduler> scheduler_;
};

TEST_F(CaptureSchedulerTest, SendsEachAgentTheStartInItsOwnClock) {
  MakeScheduler();
  auto a = Connect("a", {0, 1}, 5'000'000);
  auto b = Connect("b", {2, 3}, -7'000'000);
  absl::StatusOr<storage::CaptureRecord> r =
      scheduler_->StartCapture({.job = "j", .duration_ns = 1'000'000'000});
  ASSERT_TRUE(r.ok()) << r.status();
  // The lead grows with the number of agents.
  EXPECT_EQ(r->window_start_ns, kStart + options_.min_lead_ns + 2 * options_.lead_per_agent_ns);
  ASSERT_EQ(r->workers.size(), 4u);
  EXPECT_EQ(r->workers[2].agent_id, "b");
  const std::vector<v1::CoordinatorMessage> sent_a = a->Sent();  // a copy: Sent() returns by value
  ASSERT_EQ(sent_a.size(), 1u);
  const v1::CaptureRequest& ra = sent_a[0].capture();
  EXPECT_EQ(ra.start_agent_ns(), r->window_start_ns + 5'000'000);
  EXPECT_EQ(ra.ranks_size(), 2);
  EXPECT_EQ(b->Sent()[0].capture().start_agent_ns(), r->window_start_ns - 7'000'000);
  EXPECT_EQ(b->Sent()[0].capture().duration_ns(), 1'000'000'000);
  // Bursts sized to what the coordinator serves: 2 agents get the most exchanges.
  EXPECT_EQ(b->Sent()[0].capture().sync_spread_ns(), 100'000'000);
  // Its only exchange is 10 us good and 250 ms away: within 10 + 25 us at the start, good enough
  // to skip the burst before the window.
  EXPECT_EQ(b->Sent()[0].capture().sync_exchanges(), 0u);
  // The agent's next samples move its start: a sharper model, a sharper start.
  const TimeNs t = time_.Now();
  // A 2 us round trip that says the offset is 100 us off: it outweighs the 20 us one.
  const std::vector<ClockSample> sharper = {
      {t - 7'000'000 + 100'000, t + 1'000, t + 1'000, t + 2'000 - 7'000'000 + 100'000}};
  aligner_.AddSamples("b", sharper);
  scheduler_->OnClockUpdated("b");
  ASSERT_EQ(b->Sent().size(), 2u);
  EXPECT_EQ(b->Sent()[1].capture().capture_id(), r->id);
  EXPECT_NEAR(b->Sent()[1].capture().start_agent_ns() - b->Sent()[0].capture().start_agent_ns(),
              100'000, 5'000);
  scheduler_->OnClockUpdated("a");  // nothing new for a: nothing sent
  EXPECT_EQ(a->Sent().size(), 1u);
  // Durable at once, before any agent could answer.
  EXPECT_EQ(store_->GetCapture(r->id)->state, storage::CaptureState::kPending);
}

TEST_F(CaptureSchedulerTest, BadSpecsAndUnknownJobsAreRefused) {
  MakeScheduler();
  Connect("a", {0}, 0);
  EXPECT_EQ(scheduler_->StartCapture({.job = "j", .duration_ns = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_->StartCapture({.job = "", .duration_ns = 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_->StartCapture({.job = "other", .duration_ns = 1}).status().code(),
            absl::StatusCode::kNotFound);
  absl::Status missing =
      scheduler_->StartCapture({.job = "j", .ranks = {0, 5}, .duration_ns = 1}).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(missing.message()).find("ranks 5 of job \"j\""), std::string::npos)
      << missing;
}

// Evidence and scheduled captures start a second later than one somebody waits on, with the
// ranks asked for; a refusal is StartCapture's.
TEST_F(CaptureSchedulerTest, ABackgroundCaptureStartsASecondLater) {
  MakeScheduler();
  Connect("a", {0, 1}, 0);
  absl::StatusOr<std::string> id = scheduler_->StartBackgroundCapture(
      {.job = "j", .ranks = {1}, .duration_ns = 2'000'000'000, .delay_ns = 123});
  ASSERT_TRUE(id.ok()) << id.status();
  const absl::StatusOr<storage::CaptureRecord> r = store_->GetCapture(*id);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->window_start_ns,
            kStart + kBackgroundCaptureLeadNs + options_.min_lead_ns + options_.lead_per_agent_ns);
  ASSERT_EQ(r->workers.size(), 1u);
  EXPECT_EQ(r->workers[0].rank, 1);
  EXPECT_EQ(scheduler_->StartBackgroundCapture({.job = "other", .duration_ns = 1}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CaptureSchedulerTest, HappyPathEndsCompleteWithFrozenClocks) {
  MakeScheduler();
  scheduler_->Start();
  Connect("a", {0, 1}, 5'000'000);
  absl::StatusOr<storage::CaptureRecord> r =
      scheduler_->StartCapture({.job = "j", .duration_ns = 1'000'000'000});
  ASSERT_TRUE(r.ok());
  const std::string id = r->id;
  const TimeNs agent_start = r->window_start_ns + 5'000'000 + 300'000;  // started 0.3 ms late
  scheduler_->OnCaptureStatus("a", Status(id, {0, 1}, v1::WORKER_PHASE_ARMED));
  EXPECT_EQ(scheduler_->LiveRecord(id)->state, storage::CaptureState::kArmed);
  time_.AdvanceTo(r->window_start_ns);
  scheduler_->OnCaptureStatus("a", Status(id, {0, 1}, v1::WORKER_PHASE_CAPTURING, agent_start));
  EXPECT_EQ(scheduler_->LiveRecord(id)->state, storage::CaptureState::kCapturing);
  EXPECT_EQ(scheduler_->LiveRecord(id)->workers[0].actual_start_ns - r->window_start_ns, 300'000);
  time_.AdvanceTo(r->window_start_ns + 1'000'000'000);
  scheduler_->OnCaptureStatus("a", Status(id, {0, 1}, v1::WORKER_PHASE_COLLECTED, agent_start,
                                          agent_start + 1'000'000'000, 2));
  EXPECT_EQ(scheduler_->LiveRecord(id)->state, storage::CaptureState::kUploading);
  for (int32_t rank : {0, 1}) {
    ASSERT_TRUE(scheduler_->OnChunk(Chunk(id, "a", rank, 1, true)).ok());
    EXPECT_FALSE(scheduler_->WorkerComplete(id, rank));  // chunk 0 is still missing
    ASSERT_TRUE(
        scheduler_->OnChunk(Chunk(id, "a", rank, 1, true)).ok());  // a re-send changes nothing
    ASSERT_TRUE(scheduler_->OnChunk(Chunk(id, "a", rank, 0, false)).ok());
    EXPECT_TRUE(scheduler_->WorkerComplete(id, rank));
  }
  const storage::CaptureRecord done = WaitForState(id, storage::CaptureState::kComplete);
  const uint64_t per_chunk = testing::MakeSampleTrace().Counts().Total();
  EXPECT_EQ(done.events, 4 * per_chunk);  // 2 workers x 2 chunks, the re-send not counted
  EXPECT_EQ(done.generation, 1u);
  for (const storage::WorkerRecord& w : done.workers) {
    EXPECT_EQ(w.state, "complete");
    EXPECT_EQ(w.chunks, 2u);
    EXPECT_EQ(w.clock.source, common::ClockSource::kNetwork);
    EXPECT_EQ(w.clock.offset_ns, -5'000'000);
  }
  // The store's capture is whole, with the frozen clock applied.
  absl::StatusOr<common::Capture> loaded = storage::LoadCapture(*store_, id);
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->workers.size(), 2u);
  EXPECT_EQ(loaded->workers[1].clock.offset_ns, -5'000'000);
  EXPECT_EQ(loaded->workers[1].Counts().Total(), 2 * per_chunk);
}

// The loop's thread may first run after a capture was started and time moved past its start
// (a loaded machine): its first look must see both at once. Starting the loop last makes that
// order certain: a loop that did not look would sleep a tick past the moved time, which never
// comes.
TEST_F(CaptureSchedulerTest, WhatChangedBeforeTheLoopFirstRanIsLookedAtAtOnce) {
  MakeScheduler();
  Connect("a", {0}, 0);
  absl::StatusOr<storage::CaptureRecord> r =
      scheduler_->StartCapture({.job = "j", .duration_ns = 1'000'000'000});
  ASSERT_TRUE(r.ok()) << r.status();
  time_.AdvanceTo(r->window_start_ns + 1);  // a never acknowledged
  scheduler_->Start();
  const storage::CaptureRecord done = WaitForState(r->id, storage::CaptureState::kFailed);
  ASSERT_EQ(done.workers.size(), 1u);
  EXPECT_NE(done.workers[0].error.find("agent a did not acknowledge"), std::string::npos)
      << done.workers[0].error;
}

// A change made while the loop has released its lock to write a record (here the last chunk,
// which completes the capture) wakes the loop again at once. A loop that took it as seen when it
// next waited would, with time standing still, never complete the capture.
TEST_F(CaptureSchedulerTest, AChangeWhileTheLoopWritesARecordWakesItAgain) {
  HeldStore held(*store_);
  scheduler_ = std::make_unique<CaptureScheduler>(held, registry_, aligner_, options_, time_);
  scheduler_->Start();
  Connect("a", {0}, 0);
  absl::StatusOr<storage::CaptureRecord> r =
      scheduler_->StartCapture({.job = "j", .duration_ns = 1'000'000'000});
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string id = r->id;
  const TimeNs start = r->window_start_ns;
  scheduler_->OnCaptureStatus("a", Status(id, {0}, v1::WORKER_PHASE_ARMED));
  time_.AdvanceTo(start);
  scheduler_->OnCaptureStatus("a", Status(id, {0}, v1::WORKER_PHASE_CAPTURING, start));
  time_.AdvanceTo(start + 1'000'000'000);
  held.HoldNextPut();
  // A change: the loop looks, and writes the record it made dirty with its lock released.
  scheduler_->OnCaptureStatus(
      "a", Status(id, {0}, v1::WORKER_PHASE_COLLECTED, start, start + 1'000'000'000, 1));
  ASSERT_TRUE(testing::WaitFor([&] { return held.Holding(); }));
  ASSERT_TRUE(scheduler_->OnChunk(Chunk(id, "a", 0, 0, true)).ok());
  EXPECT_TRUE(scheduler_->WorkerComplete(id, 0));
  held.Release();
  const storage::CaptureRecord done = WaitForState(id, storage::CaptureState::kComplete);
  EXPECT_EQ(done.workers.size(), 1u);
}

TEST_F(CaptureSchedulerTest, SilentAgentMakesThePartialCaptureNameIt) {
  MakeScheduler();
  scheduler_->Start();
  Connect("a", {0}, 0);
  Connect("b", {1}, 0);
  Connect("c", {2}, std::nullopt);  // never synchronised its clock: cannot be scheduled
  absl::StatusOr<storage::CaptureRecord> r =
      scheduler_->StartCapture({.job = "j", .duration_ns = 1'000'000'000});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->workers[2].state, "failed");
  EXPECT_NE(r->workers[2].error.find("has not synchronised its clock"), std::string::npos)
      << r->workers[2].error;
  const std::string id = r->id;
  scheduler_->OnCaptureStatus("a", Status(id, {0}, v1::WORKER_PHASE_ARMED));
  scheduler_->OnCaptureStatus(
      "b", Status(id, {0}, v1::WORKER_PHASE_CAPTURING));  // not b's worker: ignored
  EXPECT_EQ(scheduler_->LiveRecord(id)->workers[0].state, "armed");
  time_.AdvanceTo(r->window_start_ns + 1);  // b never acknowledged
  std::optional<storage::CaptureRecord> live;
  ASSERT_TRUE(testing::WaitFor([&] {
    live = scheduler_->LiveRecord(id);
    return live && live->workers[1].state == "failed";
  }));
  EXPECT_EQ(live->workers[1].state, "failed");
  EXPECT_NE(live->workers[1].error.find("agent b did not acknowledge"), std::string::npos)
      << live->workers[1].error;
  // a captured but never reported the end: failed once the grace period is over.
  time_.AdvanceTo(r->window_start_ns + r->window_duration_ns + options_.capture_grace_ns);
  const storage::CaptureRecord done = WaitForState(id, storage::CaptureState::kFailed);
  EXPECT_NE(done.error.find("3 of 3 workers failed"), std::string::npos) << done.error;
  EXPECT_NE(done.error.find("did not report the end of the window"), std::string::npos)
      << done.error;
}

TEST_F(CaptureSchedulerTest, UploadsAreCheckedBeforeAnythingIsStored) {
  MakeScheduler();
  Connect("a", {0}, 0);
  Connect("b", {1}, 0);
  absl::StatusOr<storage::CaptureRecord> r =
      scheduler_->StartCapture({.job = "j", .duration_ns = 1'000'000'000});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(scheduler_->OnChunk(Chunk(r->id, "b", 0, 0, true)).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(scheduler_->OnChunk(Chunk(r->id, "a", 7, 0, true)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_->OnChunk(Chunk("nope", "a", 0, 0, true)).code(),
            absl::StatusCode::kNotFound);
  v1::UploadRequest ragged = Chunk(r->id, "a", 0, 0, true);
  ragged.mutable_chunk()->mutable_kernels()->add_start_delta(5);  // one column longer than the rest
  EXPECT_EQ(scheduler_->OnChunk(ragged).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_->LiveRecord(r->id)->events, 0u);
}

TEST_F(CaptureSchedulerTest, CancelReachesEveryAgentAndEndsTheCapture) {
  MakeScheduler();
  auto a = Connect("a", {0}, 0);
  auto b = Connect("b", {1}, 0);
  absl::StatusOr<storage::CaptureRecord> r =
      scheduler_->StartCapture({.job = "j", .duration_ns = 1'000'000'000});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(scheduler_->Cancel(r->id, "changed my mind").ok());
  for (auto& link : {a, b}) {
    ASSERT_EQ(link->Sent().size(), 2u);
    EXPECT_EQ(link->Sent()[1].cancel().capture_id(), r->id);
    EXPECT_EQ(link->Sent()[1].cancel().reason(), "changed my mind");
  }
  absl::StatusOr<storage::CaptureRecord> stored = store_->GetCapture(r->id);
  EXPECT_EQ(stored->state, storage::CaptureState::kCancelled);
  EXPECT_EQ(stored->workers[0].state, "cancelled");
  EXPECT_EQ(scheduler_->Cancel(r->id, "again").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(scheduler_->Cancel("nope", "x").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(scheduler_->LiveRecord(r->id)->state,
            storage::CaptureState::kCancelled);  // answered from memory
}

// An agent streams what its ranks record while the window runs. A rank that then fails (or a
// capture that is cancelled) leaves a partial trace behind: it must not reach the analyses.
TEST_F(CaptureSchedulerTest, WhatAFailedOrCancelledWorkerStreamedLeavesTheStore) {
  MakeScheduler();
  scheduler_->Start();
  Connect("a", {0}, 0);
  Connect("b", {1}, 0);
  absl::StatusOr<storage::CaptureRecord> r =
      scheduler_->StartCapture({.job = "j", .duration_ns = 1'000'000'000});
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string id = r->id;
  const TimeNs start = r->window_start_ns;
  for (const char* agent : {"a", "b"}) {
    const int32_t rank = agent[0] == 'a' ? 0 : 1;
    scheduler_->OnCaptureStatus(agent, Status(id, {rank}, v1::WORKER_PHASE_ARMED));
  }
  time_.AdvanceTo(start);
  scheduler_->OnCaptureStatus("a", Status(id, {0}, v1::WORKER_PHASE_CAPTURING, start));
  scheduler_->OnCaptureStatus("b", Status(id, {1}, v1::WORKER_PHASE_CAPTURING, start));
  // Both stream a chunk during the window; then b's rank fails.
  ASSERT_TRUE(scheduler_->OnChunk(Chunk(id, "a", 0, 0, false)).ok());
  ASSERT_TRUE(scheduler_->OnChunk(Chunk(id, "b", 1, 0, false)).ok());
  size_t b_chunks = 0;
  ASSERT_TRUE(
      store_->ReadWorker(id, 1, [&](common::WorkerTrace) { return ++b_chunks, absl::OkStatus(); })
          .ok());
  EXPECT_EQ(b_chunks, 1u);  // stored while it streamed
  v1::CaptureStatus failed = Status(id, {1}, v1::WORKER_PHASE_FAILED, start);
  failed.mutable_workers(0)->set_error("the probe went away");
  scheduler_->OnCaptureStatus("b", failed);
  time_.AdvanceTo(start + 1'000'000'000);
  scheduler_->OnCaptureStatus(
      "a", Status(id, {0}, v1::WORKER_PHASE_COLLECTED, start, start + 1'000'000'000, 2));
  ASSERT_TRUE(scheduler_->OnChunk(Chunk(id, "a", 0, 1, true)).ok());
  const storage::CaptureRecord done = WaitForState(id, storage::CaptureState::kPartial);
  EXPECT_EQ(done.workers[1].state, "failed");
  EXPECT_EQ(done.events, 2 * testing::MakeSampleTrace().Counts().Total()) << "a's chunks only";
  // A chunk of b's that comes after the capture finished is not stored.
  EXPECT_EQ(scheduler_->OnChunk(Chunk(id, "b", 1, 1, false)).code(), absl::StatusCode::kOk);
  absl::StatusOr<common::Capture> loaded = storage::LoadCapture(*store_, id);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->workers.size(), 1u);
  EXPECT_EQ(loaded->workers[0].info.rank, 0);
  EXPECT_EQ(loaded->workers[0].Counts().Total(), 2 * testing::MakeSampleTrace().Counts().Total());

  // Cancelled after a chunk went up: nothing of it stays.
  absl::StatusOr<storage::CaptureRecord> c =
      scheduler_->StartCapture({.job = "j", .duration_ns = 1'000'000'000});
  ASSERT_TRUE(c.ok()) << c.status();
  scheduler_->OnCaptureStatus("a", Status(c->id, {0}, v1::WORKER_PHASE_ARMED));
  time_.AdvanceTo(c->window_start_ns);
  scheduler_->OnCaptureStatus("a",
                              Status(c->id, {0}, v1::WORKER_PHASE_CAPTURING, c->window_start_ns));
  ASSERT_TRUE(scheduler_->OnChunk(Chunk(c->id, "a", 0, 0, false)).ok());
  ASSERT_TRUE(scheduler_->Cancel(c->id, "not now").ok());
  EXPECT_EQ(store_->CountCaptureKeysForTesting(c->id), 0u);
}

// A chunk whose write was under way while its worker failed and the capture finished (and
// dropped the worker's events) is deleted once it lands.
TEST_F(CaptureSchedulerTest, AChunkStillBeingWrittenWhenItsWorkerFailsIsDroppedAsItLands) {
  HeldStore held(*store_);
  scheduler_ = std::make_unique<CaptureScheduler>(held, registry_, aligner_, options_, time_);
  scheduler_->Start();
  Connect("a", {0}, 0);
  Connect("b", {1}, 0);
  absl::StatusOr<storage::CaptureRecord> r =
      scheduler_->StartCapture({.job = "j", .duration_ns = 1'000'000'000});
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string id = r->id;
  const TimeNs start = r->window_start_ns;
  scheduler_->OnCaptureStatus("a", Status(id, {0}, v1::WORKER_PHASE_ARMED));
  scheduler_->OnCaptureStatus("b", Status(id, {1}, v1::WORKER_PHASE_ARMED));
  time_.AdvanceTo(start);
  scheduler_->OnCaptureStatus("a", Status(id, {0}, v1::WORKER_PHASE_CAPTURING, start));
  scheduler_->OnCaptureStatus("b", Status(id, {1}, v1::WORKER_PHASE_CAPTURING, start));
  held.HoldNextChunk();
  absl::Status late = absl::UnknownError("not returned");
  std::thread writer([&] { late = scheduler_->OnChunk(Chunk(id, "b", 1, 0, false)); });
  ASSERT_TRUE(testing::WaitFor([&] { return held.HoldingChunk(); }));
  scheduler_->OnCaptureStatus("b", Status(id, {1}, v1::WORKER_PHASE_FAILED, start));
  time_.AdvanceTo(start + 1'000'000'000);
  scheduler_->OnCaptureStatus(
      "a", Status(id, {0}, v1::WORKER_PHASE_COLLECTED, start, start + 1'000'000'000, 1));
  ASSERT_TRUE(scheduler_->OnChunk(Chunk(id, "a", 0, 0, true)).ok());
  WaitForState(id, storage::CaptureState::kPartial);
  held.ReleaseChunk();
  writer.join();
  EXPECT_TRUE(late.ok()) << late;
  size_t b_chunks = 0;
  ASSERT_TRUE(store_
                  ->ReadWorker(id, 1,
                               [&](common::WorkerTrace) {
                                 ++b_chunks;
                                 return absl::OkStatus();
                               })
                  .ok());
  EXPECT_EQ(b_chunks, 0u);
}

TEST_F(CaptureSchedulerTest, RestartResumesLiveCaptures) {
  MakeScheduler();
  Connect("a", {0}, 0);
  absl::StatusOr<storage::CaptureRecord> r =
      scheduler_->StartCapture({.job = "j", .duration_ns = 1'000'000'000});
  ASSERT_TRUE(r.ok());
  scheduler_->OnCaptureStatus("a", Status(r->id, {0}, v1::WORKER_PHASE_CAPTURING, kStart));
  scheduler_->Stop();
  MakeScheduler();  // a new coordinator process over the same store
  ASSERT_TRUE(scheduler_->Recover().ok());
  std::optional<storage::CaptureRecord> live = scheduler_->LiveRecord(r->id);
  ASSERT_TRUE(live);
  EXPECT_EQ(live->workers[0].state, "capturing");
  // The agent re-sends everything; the worker completes.
  ASSERT_TRUE(scheduler_->OnChunk(Chunk(r->id, "a", 0, 0, true)).ok());
  EXPECT_TRUE(scheduler_->WorkerComplete(r->id, 0));
}

TEST(AgentRegistryTest, TargetsHealthAndReplacedSessions) {
  common::SimulatedTimeSource now(kStart);
  AgentRegistry registry({.heartbeat_interval_ns = 1'000'000'000}, now);
  auto hello = [](const std::string& id, std::vector<std::pair<std::string, int32_t>> workers,
                  const std::string& instance = "i1") {
    v1::AgentHello h;
    h.set_agent_id(id);
    h.set_instance_id(instance);
    for (auto& [job, rank] : workers) {
      v1::WorkerDescriptor* w = h.add_workers();
      w->set_job(job);
      w->set_rank(rank);
    }
    return h;
  };
  auto first = std::make_shared<FakeLink>();
  ASSERT_TRUE(registry.Connected(hello("a", {{"j", 0}, {"j", 1}, {"k", 0}}), "p", first).ok());
  ASSERT_TRUE(registry.Connected(hello("b", {{"j", 2}}), "p", std::make_shared<FakeLink>()).ok());
  absl::StatusOr<TargetSelection> all = registry.SelectTargets("j", {});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->targets.size(), 2u);
  EXPECT_EQ(all->targets[0].workers.size(), 2u);
  EXPECT_TRUE(all->conflicts.empty());
  absl::StatusOr<TargetSelection> some = registry.SelectTargets("j", {2});
  ASSERT_TRUE(some.ok());
  ASSERT_EQ(some->targets.size(), 1u);
  EXPECT_EQ(some->targets[0].agent_id, "b");
  EXPECT_EQ(registry.SelectTargets("none", {}).status().code(), absl::StatusCode::kNotFound);

  // Silent for three heartbeats: stale. A reconnect replaces (and closes) the old session.
  now.AdvanceTo(kStart + 3'500'000'000);
  EXPECT_EQ(registry.Snapshot()[0].health, AgentHealth::kStale);
  auto second = std::make_shared<FakeLink>();
  ASSERT_TRUE(registry.Connected(hello("a", {{"j", 0}}), "p", second).ok());
  EXPECT_FALSE(first->up);
  registry.Disconnected("a",
                        first.get());  // the old session ending does not disconnect the new one
  EXPECT_TRUE(registry.IsConnected("a"));
  EXPECT_EQ(registry.Snapshot()[0].health, AgentHealth::kHealthy);
  registry.Disconnected("a", second.get());
  EXPECT_FALSE(registry.IsConnected("a"));
  EXPECT_EQ(registry.ConnectedCount(), 1u);
  EXPECT_FALSE(registry.Send("a", v1::CoordinatorMessage()));
}

// Defect 7: a second process with a live agent's id evicted it every few seconds and
// had its clock samples merged into the first one's model; two agents claiming one rank had it
// given silently to the first. Now the impostor is refused, naming both peers, and a rank two
// agents claim is a conflict that neither is given.
TEST(AgentRegistryTest, ADuplicateLiveIdIsRefusedAndContestedRanksGoToNobody) {
  common::SimulatedTimeSource now(kStart);
  AgentRegistry registry({.heartbeat_interval_ns = 1'000'000'000}, now);
  auto hello = [](const std::string& id, const std::string& instance, const std::string& host,
                  std::vector<int32_t> ranks) {
    v1::AgentHello h;
    h.set_agent_id(id);
    h.set_instance_id(instance);
    h.set_host(host);
    for (int32_t rank : ranks) {
      v1::WorkerDescriptor* w = h.add_workers();
      w->set_job("j");
      w->set_rank(rank);
    }
    return h;
  };
  auto original = std::make_shared<FakeLink>();
  absl::StatusOr<bool> first =
      registry.Connected(hello("a", "i1", "node-1", {0, 1}), "ipv4:10.0.0.1:5000", original);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first) << "a process never seen under this id";
  absl::StatusOr<bool> impostor = registry.Connected(
      hello("a", "i2", "node-9", {0, 1}), "ipv4:10.0.0.9:6000", std::make_shared<FakeLink>());
  ASSERT_EQ(impostor.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(impostor.status().message(),
            "agent id \"a\" is already connected from ipv4:10.0.0.1:5000 (host node-1); refused "
            "the same id from "
            "ipv4:10.0.0.9:6000 (host node-9): give every agent its own --agent-id");
  EXPECT_TRUE(original->up) << "the live session is not evicted";
  EXPECT_TRUE(registry.IsCurrent("a", original.get()));
  // An id without an instance cannot prove it is the same process either.
  EXPECT_FALSE(
      registry.Connected(hello("a", "", "node-1", {0}), "p", std::make_shared<FakeLink>()).ok());
  // The same process reconnecting replaces its own session; its clock history is kept.
  auto again = std::make_shared<FakeLink>();
  absl::StatusOr<bool> reconnect =
      registry.Connected(hello("a", "i1", "node-1", {0, 1}), "ipv4:10.0.0.1:5001", again);
  ASSERT_TRUE(reconnect.ok());
  EXPECT_FALSE(*reconnect);
  EXPECT_FALSE(original->up);
  EXPECT_FALSE(registry.IsCurrent("a", original.get()));
  // Once the id is free, another process may take it: a new instance, so a new clock.
  registry.Disconnected("a", again.get());
  absl::StatusOr<bool> successor =
      registry.Connected(hello("a", "i3", "node-2", {0, 1}), "p3", std::make_shared<FakeLink>());
  ASSERT_TRUE(successor.ok());
  EXPECT_TRUE(*successor);

  // Agent b claims rank 1 too: rank 1 is a conflict, rank 0 stays a's, rank 2 is b's.
  ASSERT_TRUE(
      registry.Connected(hello("b", "i4", "node-4", {1, 2}), "p4", std::make_shared<FakeLink>())
          .ok());
  absl::StatusOr<TargetSelection> selection = registry.SelectTargets("j", {});
  ASSERT_TRUE(selection.ok()) << selection.status();
  ASSERT_EQ(selection->targets.size(), 2u);
  EXPECT_EQ(selection->targets[0].agent_id, "a");
  ASSERT_EQ(selection->targets[0].workers.size(), 1u);
  EXPECT_EQ(selection->targets[0].workers[0].rank(), 0);
  EXPECT_EQ(selection->targets[1].agent_id, "b");
  ASSERT_EQ(selection->targets[1].workers.size(), 1u);
  EXPECT_EQ(selection->targets[1].workers[0].rank(), 2);
  ASSERT_EQ(selection->conflicts.size(), 1u);
  EXPECT_EQ(selection->conflicts[0].Reason("j"),
            "rank 1 of job \"j\" is claimed by 2 agents (a (node-2, p3) and b (node-4, p4)): "
            "neither is captured; "
            "give each rank to one agent");
}

}  // namespace
}  // namespace podscope::coordinator
