// Scheduled captures (docs/life-of-a-capture.md): "capture job J every N minutes for D". Pure: the
// book of schedules, when each is due, jitter, and its persistent form; ScheduleRunner (below) runs
// them against the capture scheduler on an injected clock.
//
// Fire times are jittered (+-10% of the period, at most +-60 s, a fixed sequence per schedule),
// so that schedules made together do not capture together forever. A schedule never overlaps a
// running capture of its job: the run waits (a quarter of the period, at most 30 s) and tries
// again, counted as a deferral.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/time_types.h"
#include "storage/set_aside.h"

namespace podscope::coordinator {

using common::TimeNs;

struct ScheduleSpec {
  std::string job;
  TimeNs every_ns = 0;
  TimeNs duration_ns = 0;
  std::vector<int32_t> ranks;  // empty: every rank
};

struct Schedule {
  std::string id;
  ScheduleSpec spec;
  TimeNs created_ns = 0;
  TimeNs next_ns = 0;
  TimeNs last_run_ns = 0;
  std::string last_capture_id;
  std::string last_error;
  uint64_t runs = 0;
  uint64_t deferred = 0;  // a capture of the job was running at the time
  uint64_t failed = 0;
};

struct ScheduleLimits {
  size_t max_schedules = 256;
  TimeNs min_every_ns = 10'000'000'000;
  TimeNs max_every_ns = int64_t{7} * 86'400'000'000'000;
  TimeNs max_duration_ns = 600'000'000'000;
  size_t max_ranks = 65'536;
  // A schedule's stored form, its ranks written as ranges ("0-1023,2048"): 256 schedules of
  // this size fit the 1 MiB stored setting with room to spare, so that no one schedule can
  // take the room of the others.
  size_t max_stored_bytes = 3 << 10;
  // Appended to new ids: "-SHARD" on a sharded coordinator, so that ids are unique across shards.
  std::string id_suffix;
};

// POST /v1/schedules' body: {"job", "every_s", "duration_ms", "ranks"?}, ranks as ranges in a
// string ("0-7,12") or a list of ranks. Errors name the field.
absl::StatusOr<ScheduleSpec> ParseScheduleSpec(std::string_view json,
                                               const ScheduleLimits& limits = {});

// Not thread-safe (ScheduleRunner locks around it).
class ScheduleBook {
 public:
  explicit ScheduleBook(ScheduleLimits limits = {}) : limits_(limits) {}

  // ResourceExhausted past max_schedules. The first run is one jittered period from now.
  absl::StatusOr<Schedule> Add(ScheduleSpec spec, TimeNs now);
  bool Remove(const std::string& id);
  std::vector<Schedule> List() const;
  const Schedule* Find(const std::string& id) const;

  // The ids of the schedules due at `now`, the most overdue first.
  std::vector<std::string> Due(TimeNs now) const;
  // What became of a due schedule's run at `now`: a capture started, or it was deferred (the
  // job was busy), or it failed (the reason kept; the schedule goes on).
  void Started(const std::string& id, TimeNs now, const std::string& capture_id);
  void Deferred(const std::string& id, TimeNs now);
  void Failed(const std::string& id, TimeNs now, const std::string& error);

  // The period with this schedule's jitter for its `run`-th run: deterministic.
  static TimeNs Jittered(const std::string& id, uint64_t run, TimeNs every_ns);

  const ScheduleLimits& limits() const { return limits_; }

  // The stored form: every schedule as GET lists it, with its period and duration also as whole
  // nanoseconds, which are what FromJson reads back.
  std::string ToJson() const;
  // A stored book. A schedule that does not read back (a bound it no longer meets, a damaged
  // field) is set aside, not loaded; a text that is not a book at all is set aside whole.
  struct Loaded;
  static Loaded FromJson(std::string_view json, ScheduleLimits limits = {});

 private:
  ScheduleLimits limits_;
  std::map<std::string, Schedule> schedules_;
  uint64_t next_id_ = 1;
};

struct ScheduleBook::Loaded {
  ScheduleBook book;
  std::vector<storage::SetAsideRecord> set_aside;
};

// Writes one schedule as GET /v1/schedules lists it; `warning`, when not empty, is one more member
// saying why its captures may fail.
std::string ScheduleToJson(const Schedule& s, std::string_view warning = {});

}  // namespace podscope::coordinator
