#include "coordinator/capture/schedule_runner.h"

#include "common/status_format.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {

absl::StatusOr<std::unique_ptr<ScheduleRunner>> ScheduleRunner::Create(
    storage::TraceStore& store, const common::TimeSource& time, ScheduleHooks hooks,
    ScheduleLimits limits) {
  ASSIGN_OR_RETURN(std::optional<std::string> stored, store.GetSetting(kSchedulesSetting));
  ScheduleBook::Loaded loaded{ScheduleBook(limits), {}};
  if (stored.has_value()) loaded = ScheduleBook::FromJson(*stored, limits);
  for (storage::SetAsideRecord& r : loaded.set_aside) {
    r.set_aside_ns = time.Now();
    spdlog::error("stored schedule {}: {}: set aside (GET /v1/schedules lists it); the others run",
                  r.id.empty() ? "book" : r.id, r.error);
  }
  const bool any_new = !loaded.set_aside.empty();
  // Kept before the book is stored again without them: nothing is lost if this start stops here.
  ASSIGN_OR_RETURN(std::vector<storage::SetAsideRecord> set_aside,
                   storage::SetAside(store, kSchedulesSetting, std::move(loaded.set_aside)));
  if (any_new) {
    if (absl::Status s = store.PutSetting(kSchedulesSetting, loaded.book.ToJson()); !s.ok()) {
      return s;
    }
  }
  return std::unique_ptr<ScheduleRunner>(new ScheduleRunner(
      store, time, std::move(hooks), std::move(loaded.book), std::move(set_aside)));
}

ScheduleRunner::ScheduleRunner(storage::TraceStore& store, const common::TimeSource& time,
                               ScheduleHooks hooks, ScheduleBook book,
                               std::vector<storage::SetAsideRecord> set_aside)
    : store_(store),
      time_(time),
      hooks_(std::move(hooks)),
      set_aside_(std::move(set_aside)),
      book_(std::move(book)) {}

ScheduleRunner::~ScheduleRunner() { Stop(); }

absl::Status ScheduleRunner::Persist() {
  return store_.PutSetting(kSchedulesSetting, book_.ToJson());
}

absl::StatusOr<Schedule> ScheduleRunner::Add(ScheduleSpec spec) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Schedule added, book_.Add(std::move(spec), time_.Now()));
  // What a restart will read is what the caller is told of, or the caller is told why not.
  const std::string text = book_.ToJson();
  const ScheduleBook::Loaded back = ScheduleBook::FromJson(text, book_.limits());
  const Schedule* read = back.book.Find(added.id);
  if (read == nullptr || ScheduleToJson(*read) != ScheduleToJson(added)) {
    book_.Remove(added.id);
    return absl::InvalidArgumentError(common::StrCat(
        "this schedule would not read back as it is after a restart",
        back.set_aside.empty() ? "" : common::StrCat(": ", back.set_aside.front().error)));
  }
  if (absl::Status s = store_.PutSetting(kSchedulesSetting, text); !s.ok()) {
    book_.Remove(added.id);
    return s;
  }
  spdlog::info("schedule {}: job {} every {:.0f} s for {:.0f} ms", added.id, added.spec.job,
               static_cast<double>(added.spec.every_ns) / 1e9,
               static_cast<double>(added.spec.duration_ns) / 1e6);
  return added;
}

absl::Status ScheduleRunner::Remove(const std::string& id) {
  absl::MutexLock lock(&mu_);
  // Stored first: memory changes only once the store has.
  ScheduleBook next = book_;
  if (!next.Remove(id)) return absl::NotFoundError(common::StrCat("no schedule ", id));
  RETURN_IF_ERROR(store_.PutSetting(kSchedulesSetting, next.ToJson()));
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
    for (const std::string& id : book_.Due(time_.Now())) due.emplace_back(id, book_.Find(id)->spec);
  }
  if (due.empty()) return;
  // The scheduler has locks of its own: asked outside ours.
  for (const auto& [id, spec] : due) {
    const bool busy = hooks_.busy(spec.job);
    absl::StatusOr<std::string> capture =
        busy ? absl::StatusOr<std::string>("") : hooks_.start(spec);
    absl::MutexLock lock(&mu_);
    const TimeNs now = time_.Now();
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
  if (absl::Status s = Persist(); !s.ok()) spdlog::warn("schedules: not stored: {}", s);
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
