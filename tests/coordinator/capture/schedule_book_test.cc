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

// Ranks as ranges, in the request or as they are stored and listed; each schedule's stored form
// within its share of the stored setting, so that no one schedule takes the others' room.
TEST(ScheduleBookTest, RanksAreRangesAndEachScheduleFitsItsShareOfTheStore) {
  absl::StatusOr<ScheduleSpec> wide =
      ParseScheduleSpec(R"({"job":"j","every_s":60,"duration_ms":500,"ranks":"0-65535"})");
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->ranks.size(), 65'536u);
  EXPECT_NE(ParseScheduleSpec(R"({"job":"j","every_s":60,"duration_ms":500,"ranks":"0-65536"})")
                .status()
                .message()
                .find("more than 65536 ranks"),
            std::string::npos);
  EXPECT_FALSE(ParseScheduleSpec(R"({"job":"j","every_s":60,"duration_ms":500,"ranks":7})").ok());
  EXPECT_FALSE(ParseScheduleSpec(R"({"job":"j","every_s":60,"duration_ms":500,"ranks":")" +
                                 std::string(1025, '1') + R"("})")
                   .ok());
  ScheduleBook book;
  absl::StatusOr<Schedule> added = book.Add(*wide, 0);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_NE(ScheduleToJson(*added).find(R"("ranks":"0-65535")"), std::string::npos);
  // Every other rank of 4,096 has no shorter form: over the schedule's bound, refused by name.
  ScheduleSpec scattered = Every(60 * kS);
  for (int32_t r = 0; r < 4096; r += 2) scattered.ranks.push_back(r);
  absl::Status refused = book.Add(scattered, 0).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("write ranks as ranges"), std::string::npos) << refused;
  // The count bound comes first: 256 of the widest schedules fit the 1 MiB setting.
  // The longest job name, 65,536 ranks of which 200 stand alone, and a long last error each.
  ScheduleSpec widest = *wide;
  widest.job = std::string(128, '"');
  widest.ranks.resize(65'536 - 200);
  for (int32_t r = 70'000; r < 70'000 + 400; r += 2) widest.ranks.push_back(r);
  for (int i = 1; i < 256; ++i) {
    absl::StatusOr<Schedule> s = book.Add(widest, 0);
    ASSERT_TRUE(s.ok()) << i << ": " << s.status();
    book.Failed(s->id, 1, std::string(5000, '\x01') + "\xc3\xa9");
  }
  EXPECT_EQ(book.Add(widest, 0).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_LT(book.ToJson().size(), size_t{1} << 20);
  ScheduleBook::Loaded back = ScheduleBook::FromJson(book.ToJson());
  EXPECT_TRUE(back.set_aside.empty()) << back.set_aside.front().error;
  EXPECT_EQ(back.book.List().size(), 256u);
  EXPECT_EQ(back.book.List().back().last_error, std::string(512, ' '));
}

struct RunnerFixture {
  podscope::testing::ScratchDir dir;
  std::unique_ptr<storage::RocksDbTraceStore> store;
  common::SimulatedTimeSource time{1'000 * kS};
  std::set<std::string> busy;
  std::vector<std::string> started;  // jobs
  std::unique_ptr<ScheduleRunner> runner;

  RunnerFixture() { Open(); }
  void Open() {
    runner.reset();
    store.reset();
    store = std::move(*storage::RocksDbTraceStore::Open({.path = dir.File("db")}));
    absl::StatusOr<std::unique_ptr<ScheduleRunner>> r = ScheduleRunner::Create(
        *store, time,
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
  f.time.AdvanceTo(s->next_ns);
  f.runner->Tick();
  EXPECT_TRUE(f.started.empty());
  EXPECT_EQ(f.runner->Get(s->id)->deferred, 1u);
  EXPECT_EQ(f.runner->Get(s->id)->next_ns, f.time.Now() + 10 * kS);
  f.busy.clear();
  f.time.AdvanceBy(10 * kS);
  f.runner->Tick();
  ASSERT_EQ(f.started, std::vector<std::string>{"llama"});
  EXPECT_EQ(f.runner->Get(s->id)->last_capture_id, "cap-1");
  // Its own capture still running when the next run is due: deferred again, never a second one.
  f.time.AdvanceTo(f.runner->Get(s->id)->next_ns);
  f.runner->Tick();
  EXPECT_EQ(f.started.size(), 1u);
  EXPECT_EQ(f.runner->Get(s->id)->deferred, 2u);
  // Another job's schedule is not held up.
  ASSERT_TRUE(f.runner->Add(Every(40 * kS, "bert")).ok());
  f.time.AdvanceBy(60 * kS);
  f.runner->Tick();
  EXPECT_EQ(f.started, (std::vector<std::string>{"llama", "bert"}));
}

TEST(ScheduleRunnerTest, SchedulesAndTheirProgressSurviveARestart) {
  RunnerFixture f;
  absl::StatusOr<Schedule> kept = f.runner->Add(Every(60 * kS));
  absl::StatusOr<Schedule> gone = f.runner->Add(Every(60 * kS, "bert"));
  ASSERT_TRUE(kept.ok() && gone.ok());
  f.time.AdvanceTo(std::max(kept->next_ns, gone->next_ns));
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

// Periods and durations are read to the nearest nanosecond and stored as whole nanoseconds: a
// schedule a nanosecond under its bound reads back a nanosecond under it, every time.
TEST(ScheduleBookTest, StoredSchedulesReadBackToTheNanosecond) {
  absl::StatusOr<ScheduleSpec> spec =
      ParseScheduleSpec(R"({"job":"demo","every_s":512.0080221745,"duration_ms":512008.0221734})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->every_ns, 512'008'022'174);  // 512008022174.49994 in binary: the nearest
  EXPECT_EQ(spec->duration_ns, 512'008'022'173);
  // 512008022173.5 rounds to the period itself: not under it.
  EXPECT_FALSE(
      ParseScheduleSpec(R"({"job":"demo","every_s":512.0080221745,"duration_ms":512008.0221735})")
          .ok());
  ScheduleBook book;
  ASSERT_TRUE(book.Add(*spec, 1).ok());
  for (int trip = 0; trip < 3; ++trip) {
    ScheduleBook::Loaded back = ScheduleBook::FromJson(book.ToJson());
    ASSERT_TRUE(back.set_aside.empty()) << back.set_aside.front().error;
    ASSERT_EQ(back.book.List().size(), 1u);
    EXPECT_EQ(back.book.List()[0].spec.every_ns, 512'008'022'174);
    EXPECT_EQ(back.book.List()[0].spec.duration_ns, 512'008'022'173);
    book = std::move(back.book);
  }
  // A book an older version stored, with decimal figures only: read to the nearest nanosecond.
  ScheduleBook::Loaded old = ScheduleBook::FromJson(
      R"({"next_id":2,"schedules":[{"id":"sch-000001","job":"demo","every_s":512.008022174,)"
      R"("duration_ms":512008.022173,"ranks":[3],"created_ns":1,"next_ns":2,"last_run_ns":0,)"
      R"("last_capture_id":null,"last_error":"","runs":0,"deferred":0,"failed":0}]})");
  ASSERT_TRUE(old.set_aside.empty()) << old.set_aside.front().error;
  EXPECT_EQ(old.book.List()[0].spec.every_ns, 512'008'022'174);
  EXPECT_EQ(old.book.List()[0].spec.duration_ns, 512'008'022'173);
  EXPECT_EQ(old.book.List()[0].spec.ranks, std::vector<int32_t>{3});
}

// A stored schedule that does not read back is set aside with its reason and its text; the rest
// load, and new ids come after every stored one.
TEST(ScheduleBookTest, SchedulesThatDoNotReadBackAreSetAsideAndTheRestLoad) {
  const std::string good =
      R"({"id":"sch-000001","job":"good","every_ns":60000000000,"duration_ns":1000000000,)"
      R"("every_s":60,"duration_ms":1000,"ranks":[],"created_ns":1,"next_ns":2,"last_run_ns":0,)"
      R"("last_capture_id":null,"last_error":"","runs":4,"deferred":0,"failed":0})";
  ScheduleBook::Loaded loaded = ScheduleBook::FromJson(
      R"({"next_id":2,"schedules":[)" + good + R"(,)" +
      R"({"id":"sch-000007","job":"bad","every_ns":60000000000,"duration_ns":60000000000,)"
      R"("ranks":[],"created_ns":1,"next_ns":2,"last_run_ns":0,"last_capture_id":null,)"
      R"("last_error":"","runs":0,"deferred":0,"failed":0},)"
      R"({"id":"sch-000008","job":"j","ranks":"all"},)" +
      good + R"(,42]})");
  ASSERT_EQ(loaded.book.List().size(), 1u);
  EXPECT_EQ(loaded.book.List()[0].runs, 4u);
  ASSERT_EQ(loaded.set_aside.size(), 4u);
  EXPECT_EQ(loaded.set_aside[0].id, "sch-000007");
  EXPECT_NE(loaded.set_aside[0].error.find("duration_ms"), std::string::npos)
      << loaded.set_aside[0].error;
  EXPECT_NE(loaded.set_aside[0].record.find("\"bad\""), std::string::npos);
  EXPECT_EQ(loaded.set_aside[1].id, "sch-000008");
  EXPECT_NE(loaded.set_aside[1].error.find("does not read as a schedule"), std::string::npos);
  EXPECT_EQ(loaded.set_aside[2].error, "a second schedule with this id");
  EXPECT_EQ(loaded.set_aside[3].id, "");
  EXPECT_EQ(loaded.set_aside[3].record, "42");
  absl::StatusOr<Schedule> next = loaded.book.Add(Every(60 * kS), 10);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->id, "sch-000009");
  // Not a book at all: set aside whole, nothing loaded.
  ScheduleBook::Loaded junk = ScheduleBook::FromJson("{\"schedules\": 3");
  EXPECT_TRUE(junk.book.List().empty());
  ASSERT_EQ(junk.set_aside.size(), 1u);
  EXPECT_EQ(junk.set_aside[0].record, "{\"schedules\": 3");
}

// Set aside at start-up: kept under the setting's companion (across starts), the book stored
// again without them, the good ones run.
TEST(ScheduleRunnerTest, AStartSetsAsideWhatDoesNotReadBackAndKeepsIt) {
  RunnerFixture f;
  absl::StatusOr<Schedule> kept = f.runner->Add(Every(60 * kS));
  ASSERT_TRUE(kept.ok());
  std::string stored = **f.store->GetSetting(kSchedulesSetting);
  stored.insert(stored.size() - 2, R"(,{"id":"sch-000050","job":"x"})");
  ASSERT_TRUE(f.store->PutSetting(kSchedulesSetting, stored).ok());
  f.Open();
  ASSERT_EQ(f.runner->List().size(), 1u);
  ASSERT_EQ(f.runner->SetAside().size(), 1u);
  EXPECT_EQ(f.runner->SetAside()[0].id, "sch-000050");
  EXPECT_EQ(f.runner->SetAside()[0].set_aside_ns, f.time.Now());
  const std::string stored_again = **f.store->GetSetting(kSchedulesSetting);
  EXPECT_EQ(stored_again.find("sch-000050"), std::string::npos) << stored_again;
  EXPECT_NE(stored_again.find(kept->id), std::string::npos) << stored_again;
  f.time.AdvanceBy(kS);
  f.Open();  // nothing new to set aside; what was is still listed
  ASSERT_EQ(f.runner->SetAside().size(), 1u);
  EXPECT_EQ(f.runner->SetAside()[0].set_aside_ns, f.time.Now() - kS);
  f.time.AdvanceTo(f.runner->List()[0].next_ns);
  f.runner->Tick();
  EXPECT_EQ(f.started, std::vector<std::string>{"llama"});
}

}  // namespace
}  // namespace podscope::coordinator
