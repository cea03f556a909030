#include "coordinator/capture/schedule_runner.h"

#include "common/str_util.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {

absl::StatusOr<std::unique_ptr<ScheduleRunner>> ScheduleRunner::Create(storage::TraceStore& store,
                                                                       std::function<TimeNs()> now,
                                                                       ScheduleHooks hooks,
                                                                       ScheduleLimits limits) {
  absl::StatusOr<std::optional<std::string>> stored = store.GetSetting(kSchedulesSetting);
  if (!stored.ok()) return stored.status();
  ScheduleBook book(limits);
  if (stored->has_value()) {
    absl::StatusOr<ScheduleBook> loaded = ScheduleBook::FromJson(**stored, limits);
    if (!loaded.ok()) return loaded.status();
    book = std::move(*loaded);
  }
  return std::unique_ptr<ScheduleRunner>(
      new ScheduleRunner(store, std::move(now), std::move(hooks), std::move(book)));
}

ScheduleRunner::ScheduleRunner(storage::TraceStore& store, std::function<TimeNs()> now,
                               ScheduleHooks hooks, ScheduleBook book)
    : store_(store), now_(std::move(now)), hooks_(std::move(hooks)), book_(std::move(book)) {}

ScheduleRunner::~ScheduleRunner() { Stop(); }

absl::Status ScheduleRunner::Persist() {
  return store_.PutSetting(kSchedulesSetting, book_.ToJson());
}

absl::StatusOr<Schedule> ScheduleRunner::Add(ScheduleSpec spec) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Schedule> added = book_.Add(std::move(spec), now_());
  if (!added.ok()) return added.status();
  if (absl::Status s = Persist(); !s.ok()) {
    book_.Remove(added->id);
    return s;
  }
  spdlog::info("schedule {}: job {} every {:.0f} s for {:.0f} ms", added->id, added->spec.job,
               static_cast<double>(added->spec.every_ns) / 1e9,
               static_cast<double>(added->spec.duration_ns) / 1e6);
  return added;
}

absl::Status ScheduleRunner::Remove(const std::string& id) {
  absl::MutexLock lock(&mu_);
  // Stored first: memory changes only once the store has.
  ScheduleBook next = book_;
  if (!next.Remove(id)) return absl::NotFoundError(common::StrCat("no schedule ", id));
  if (absl::Status s = store_.PutSetting(kSchedulesSetting, next.ToJson()); !s.ok()) return s;
  book_ = std::move(next);
  spdlog::info("schedule {} deleted", id);
  return absl::OkStatus();
}

std::vector<Schedule> ScheduleRunner::List() const {
  absl::MutexLock lock(&mu_);
  return book_.List();
}

std::optional<Schedule> ScheduleRunner::Get(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  const Schedule* s = book_.Find(id);
  return s == nullptr ? std::nullopt : std::optional<Schedule>(*s);
}

void ScheduleRunner::Tick() {
  std::vector<std::pair<std::string, ScheduleSpec>> due;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& id : book_.Due(now_())) due.emplace_back(id, book_.Find(id)->spec);
  }
  if (due.empty()) return;
  // The scheduler has locks of its own: asked outside ours.
  for (const auto& [id, spec] : due) {
    const bool busy = hooks_.busy(spec.job);
    absl::StatusOr<std::string> capture =
        busy ? absl::StatusOr<std::string>("") : hooks_.start(spec);
    absl::MutexLock lock(&mu_);
    const TimeNs now = now_();
    if (busy) {
      book_.Deferred(id, now);
    } else if (capture.ok()) {
      book_.Started(id, now, *capture);
      spdlog::info("schedule {}: capture {} of job {}", id, *capture, spec.job);
    } else {
      book_.Failed(id, now, std::string(capture.status().message()));
      spdlog::warn("schedule {}: no capture of job {}: {}", id, spec.job,
                   std::string(capture.status().message()));
    }
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Persist(); !s.ok())
    spdlog::warn("schedules: not stored: {}", std::string(s.message()));
}

void ScheduleRunner::Start() {
  thread_ = std::thread([this] {
    absl::MutexLock lock(&run_mu_);
    while (!stopping_) {
      run_mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Seconds(1));
      if (stopping_) break;
      run_mu_.Unlock();
      Tick();
      run_mu_.Lock();
    }
  });
}

void ScheduleRunner::Stop() {
  {
    absl::MutexLock lock(&run_mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace podscope::coordinator
