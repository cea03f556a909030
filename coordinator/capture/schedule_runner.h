// Runs the schedule book (schedule_book.h) against the capture scheduler: kept in the store (it
// survives a restart), ticked every second on its own thread, or by tests on an injected clock.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/time_source.h"
#include "coordinator/capture/schedule_book.h"
#include "storage/trace_store.h"

namespace podscope::coordinator {

struct ScheduleHooks {
  // Starts a capture of the spec; its id.
  std::function<absl::StatusOr<std::string>(const ScheduleSpec& spec)> start;
  // Whether a capture of the job is running now (a scheduled one, an evidence one, a person's).
  std::function<bool(const std::string& job)> busy;
};

class ScheduleRunner {
 public:
  // Loads the stored schedules. One that does not read back is set aside (storage/set_aside.h):
  // logged, kept under the setting's companion, listed by SetAside(); the rest run.
  static absl::StatusOr<std::unique_ptr<ScheduleRunner>> Create(storage::TraceStore& store,
                                                                const common::TimeSource& time,
                                                                ScheduleHooks hooks,
                                                                ScheduleLimits limits = {});
  ~ScheduleRunner();

  // Stored before it answers: a schedule the caller was told of survives a crash, and reads back
  // as it was told (checked on the stored text; InvalidArgument otherwise).
  absl::StatusOr<Schedule> Add(ScheduleSpec spec);
  absl::Status Remove(const std::string& id);  // NotFound for an unknown id
  std::vector<Schedule> List() const;
  std::optional<Schedule> Get(const std::string& id) const;
  // The stored schedules that did not read back, at this start or an earlier one.
  const std::vector<storage::SetAsideRecord>& SetAside() const { return set_aside_; }

  // Runs the schedules due at now(): a capture each, or a deferral while the job is busy.
  void Tick();
  void Start();  // ticks every second until Stop
  void Stop();

 private:
  ScheduleRunner(storage::TraceStore& store, const common::TimeSource& time, ScheduleHooks hooks,
                 ScheduleBook book, std::vector<storage::SetAsideRecord> set_aside);
  absl::Status Persist() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  storage::TraceStore& store_;
  const common::TimeSource& time_;
  const ScheduleHooks hooks_;
  const std::vector<storage::SetAsideRecord> set_aside_;
  mutable absl::Mutex mu_;
  ScheduleBook book_ ABSL_GUARDED_BY(mu_);
  absl::Mutex run_mu_;
  bool stopping_ ABSL_GUARDED_BY(run_mu_) = false;
  std::thread thread_;
};

inline constexpr std::string_view kSchedulesSetting = "capture_schedules";

}  // namespace podscope::coordinator
