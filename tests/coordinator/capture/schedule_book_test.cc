// Scheduled captures on an injected clock: they fire on time (with their jitter), never over a
// running capture of the job, and survive a restart. No threads, no sleeps.
#include "coordinator/capture/schedule_book.h"

#include <gtest/gtest.h>

#include <set>

#include "coordinator/capture/schedule_runner.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/test_paths.h"

namespace podscope::coordinator {
namespace {

constexpr TimeNs kS = 1'000'000'000;

ScheduleSpec Every(TimeNs every, const std::string& job = "llama") {
  return {.job = job, .every_ns = every, .duration_ns = 2 * kS};
}

TEST(ScheduleBookTest, JitterIsWithinTenPercentCappedAtAMinuteAndFixedPerScheduleAndRun) {
  std::set<TimeNs> seen;
  for (uint64_t run = 0; run < 200; ++run) {
    const TimeNs t = ScheduleBook::Jittered("sch-000001", run, 100 * kS);
    EXPECT_GE(t, 90 * kS);
    EXPECT_LE(t, 110 * kS);
    EXPECT_EQ(t, ScheduleBook::Jittered("sch-000001", run, 100 * kS)) << "deterministic";
    seen.insert(t);
    const TimeNs hour = ScheduleBook::Jittered("sch-000001", run, 3600 * kS);
    EXPECT_GE(hour, 3540 * kS) << "at most a minute early";
    EXPECT_LE(hour, 3660 * kS);
  }
  EXPECT_GT(seen.size(), 150u) << "spread, not a constant offset";
  EXPECT_NE(ScheduleBook::Jittered("sch-000001", 0, 100 * kS),
            ScheduleBook::Jittered("sch-000002", 0, 100 * kS));
}

TEST(ScheduleBookTest, FiresOnTimeThenEveryJitteredPeriod) {
  ScheduleBook book;
  const TimeNs t0 = 1'000 * kS;
  absl::StatusOr<Schedule> s = book.Add(Every(60 * kS), t0);
  ASSERT_TRUE(s.ok()) << s.status();
  const TimeNs first = t0 + ScheduleBook::Jittered(s->id, 0, 60 * kS);
  EXPECT_EQ(s->next_ns, first);
  EXPECT_TRUE(book.Due(first - 1).empty());
  ASSERT_EQ(book.Due(first), std::vector<std::string>{s->id});
  book.Started(s->id, first, "cap-1");
  const Schedule* after = book.Find(s->id);
  EXPECT_EQ(after->runs, 1u);
  EXPECT_EQ(after->last_capture_id, "cap-1");
  EXPECT_EQ(after->next_ns, first + ScheduleBook::Jittered(s->id, 1, 60 * kS));
  EXPECT_TRUE(book.Due(first + 53 * kS).empty()) << "not before 90% of the period";
  // A failed run keeps the schedule and says why.
  book.Failed(s->id, after->next_ns, "no connected agent serves job \"llama\"");
  EXPECT_EQ(book.Find(s->id)->failed, 1u);
  EXPECT_EQ(book.Find(s->id)->last_error, "no connected agent serves job \"llama\"");
}

TEST(ScheduleBookTest, BadSpecsAndTooManySchedulesAreRefusedByName) {
  auto error = [](std::string_view json) {
    return std::string(ParseScheduleSpec(json).status().message());
  };
  EXPECT_TRUE(
      ParseScheduleSpec(R"({"job":"j","every_s":60,"duration_ms":500,"ranks":[0,3]})").ok());
  EXPECT_NE(error(R"({"every_s":60,"duration_ms":500})").find("job"), std::string::npos);
  EXPECT_NE(error(R"({"job":"j","every_s":1,"duration_ms":500})").find("every_s: must be 10 to"),
            std::string::npos);
  EXPECT_NE(error(R"({"job":"j","every_s":60,"duration_ms":60000})").find("duration < every"),
            std::string::npos);
  EXPECT_NE(error(R"({"job":"j","every_s":60,"duration_ms":500,"rank":[1]})").find("\"ranks\""),
            std::string::npos);
  EXPECT_NE(error(R"({"job":"j","every_s":60,"duration_ms":500,"ranks":[-1]})").find("ranks"),
            std::string::npos);
  EXPECT_NE(error(R"({"job":"bad\u001bjob","every_s":60,"duration_ms":500})").find("job"),
            std::string::npos);
  ScheduleBook book({.max_schedules = 2});
  ASSERT_TRUE(book.Add(Every(60 * kS), 0).ok());
  ASSERT_TRUE(book.Add(Every(60 * kS), 0).ok());
  EXPECT_EQ(book.Add(Every(60 * kS), 0).status().code(), absl::StatusCode::kResourceExhausted);
}

struct RunnerFixture {
  podscope::testing::ScratchDir dir;
  std::unique_ptr<storage::RocksDbTraceStore> store;
  TimeNs now = 1'000 * kS;
  std::set<std::string> busy;
  std::vector<std::string> started;  // jobs
  std::unique_ptr<ScheduleRunner> runner;

  RunnerFixture() { Open(); }
  void Open() {
    runner.reset();
    store.reset();
    store = std::move(*storage::RocksDbTraceStore::Open({.path = dir.File("db")}));
    absl::StatusOr<std::unique_ptr<ScheduleRunner>> r = ScheduleRunner::Create(
        *store, [this] { return now; },
        {.start = [this](const ScheduleSpec& spec) -> absl::StatusOr<std::string> {
           started.push_back(spec.job);
           busy.insert(spec.job);  // running until the test says it ended
           return "cap-" + std::to_string(started.size());
         },
         .busy = [this](const std::string& job) { return busy.count(job) > 0; }});
    ASSERT_TRUE(r.ok()) << r.status();
    runner = std::move(*r);
  }
};

// A schedule never overlaps a running capture of its job, whoever started that capture: the
// run waits a quarter period (at most 30 s) and tries again.
TEST(ScheduleRunnerTest, NeverOverlapsARunningCaptureOfTheJob) {
  RunnerFixture f;
  absl::StatusOr<Schedule> s = f.runner->Add(Every(40 * kS));
  ASSERT_TRUE(s.ok());
  f.busy.insert("llama");  // say, an evidence capture
  f.now = s->next_ns;
  f.runner->Tick();
  EXPECT_TRUE(f.started.empty());
  EXPECT_EQ(f.runner->Get(s->id)->deferred, 1u);
  EXPECT_EQ(f.runner->Get(s->id)->next_ns, f.now + 10 * kS);
  f.busy.clear();
  f.now += 10 * kS;
  f.runner->Tick();
  ASSERT_EQ(f.started, std::vector<std::string>{"llama"});
  EXPECT_EQ(f.runner->Get(s->id)->last_capture_id, "cap-1");
  // Its own capture still running when the next run is due: deferred again, never a second one.
  f.now = f.runner->Get(s->id)->next_ns;
  f.runner->Tick();
  EXPECT_EQ(f.started.size(), 1u);
  EXPECT_EQ(f.runner->Get(s->id)->deferred, 2u);
  // Another job's schedule is not held up.
  ASSERT_TRUE(f.runner->Add(Every(40 * kS, "bert")).ok());
  f.now += 60 * kS;
  f.runner->Tick();
  EXPECT_EQ(f.started, (std::vector<std::string>{"llama", "bert"}));
}

TEST(ScheduleRunnerTest, SchedulesAndTheirProgressSurviveARestart) {
  RunnerFixture f;
  absl::StatusOr<Schedule> kept = f.runner->Add(Every(60 * kS));
  absl::StatusOr<Schedule> gone = f.runner->Add(Every(60 * kS, "bert"));
  ASSERT_TRUE(kept.ok() && gone.ok());
  f.now = std::max(kept->next_ns, gone->next_ns);
  f.runner->Tick();
  ASSERT_EQ(f.started.size(), 2u);
  ASSERT_TRUE(f.runner->Remove(gone->id).ok());
  EXPECT_EQ(f.runner->Remove(gone->id).code(), absl::StatusCode::kNotFound);
  const Schedule before = *f.runner->Get(kept->id);
  f.Open();
  const std::vector<Schedule> after = f.runner->List();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].id, kept->id);
  EXPECT_EQ(after[0].next_ns, before.next_ns);
  EXPECT_EQ(after[0].runs, 1u);
  EXPECT_EQ(after[0].last_capture_id, before.last_capture_id);
  // New ids do not reuse old ones.
  absl::StatusOr<Schedule> fresh = f.runner->Add(Every(60 * kS));
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(fresh->id, gone->id);
  EXPECT_NE(fresh->id, kept->id);
}

}  // namespace
}  // namespace podscope::coordinator
