#include "coordinator/capture/capture_scheduler.h"

#include <algorithm>
#include <set>

#include "common/chunk_codec.h"
#include "common/status_format.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "coordinator/clock/capture_clocks.h"
#include "podscope/v1/trace.pb.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {
namespace {

// How often the scheduler looks at deadlines when nothing else wakes it.
constexpr TimeNs kTickNs = 20 * common::kNanosPerMilli;

bool Unfinished(const storage::WorkerRecord& w) {
  return w.state == LiveCapture::PhaseName(LiveCapture::Phase::kFailed) ||
         w.state == LiveCapture::PhaseName(LiveCapture::Phase::kCancelled);
}

}  // namespace

using storage::CaptureRecord;
using storage::CaptureState;
using storage::WorkerRecord;

using Phase = LiveCapture::Phase;

CaptureScheduler::CaptureScheduler(storage::TraceStore& store, AgentRegistry& registry,
                                   ClockAligner& aligner, SchedulerOptions options,
                                   const common::TimeSource& time)
    : store_(store), registry_(registry), aligner_(aligner), options_(options), time_(time) {}

CaptureScheduler::~CaptureScheduler() { Stop(); }

void CaptureScheduler::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void CaptureScheduler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  // Whatever is live stays in the store as it is; the next run's Recover() picks it up.
  absl::MutexLock lock(&mu_);
  for (auto& [id, c] : live_) {
    if (absl::Status s = store_.PutCapture(c->record); !s.ok()) {
      spdlog::error("capture {}: saving its state at shutdown: {}", id, s);
    }
  }
}

absl::Status CaptureScheduler::Recover() {
  for (CaptureState state : {CaptureState::kPending, CaptureState::kArmed, CaptureState::kCapturing,
                             CaptureState::kUploading}) {
    storage::CaptureFilter filter;
    filter.state = state;
    filter.limit = 100000;
    ASSIGN_OR_RETURN(std::vector<CaptureRecord> records, store_.ListCaptures(filter));
    for (CaptureRecord& r : records) {
      auto c = std::make_unique<LiveCapture>();
      c->max_events_per_worker = options_.max_events_per_worker;
      c->max_upload_bytes = options_.max_upload_bytes_per_worker;
      c->workers.resize(r.workers.size());
      for (size_t i = 0; i < r.workers.size(); ++i) {
        c->by_rank[r.workers[i].rank] = i;
        c->ranks_by_agent[r.workers[i].agent_id].push_back(r.workers[i].rank);
        c->workers[i].phase =
            LiveCapture::PhaseFromName(r.workers[i].state).value_or(Phase::kPending);
      }
      c->record = std::move(r);
      c->deadlines_from_ns = time_.Now() + options_.capture_grace_ns;
      spdlog::info("capture {}: resuming after a restart ({} workers, state {})", c->record.id,
                   c->workers.size(), storage::CaptureStateName(c->record.state));
      absl::MutexLock lock(&mu_);
      live_.emplace(c->record.id, std::move(c));
    }
  }
  return absl::OkStatus();
}

absl::Status CaptureScheduler::Validate(const CaptureSpec& spec) const {
  if (spec.job.empty() || spec.job.size() > 128)
    return absl::InvalidArgumentError("job must be 1-128 characters");
  if (spec.duration_ns <= 0 || spec.duration_ns > options_.max_duration_ns) {
    return absl::InvalidArgumentError(
        common::StrCat("duration must be in (0, ", options_.max_duration_ns / 1'000'000, "] ms"));
  }
  if (spec.delay_ns < 0 || spec.delay_ns > options_.max_delay_ns) {
    return absl::InvalidArgumentError(
        common::StrCat("delay must be in [0, ", options_.max_delay_ns / 1'000'000, "] ms"));
  }
  if (spec.ranks.size() > options_.max_workers_per_capture) {
    return absl::InvalidArgumentError(
        common::StrCat("at most ", options_.max_workers_per_capture, " ranks per capture"));
  }
  return absl::OkStatus();
}

namespace {

// The capture's workers in rank order (their index is their key in the store). A rank several
// agents claim is a worker that fails at once, with the reason.
void PlaceWorkers(const TargetSelection& selection, const std::string& job, LiveCapture& c) {
  struct Placed {
    int32_t rank;
    const CaptureTarget* target;         // null for a conflict
    const v1::WorkerDescriptor* worker;  // null for a conflict
    const RankConflict* conflict;
  };
  std::vector<Placed> placed;
  for (const CaptureTarget& t : selection.targets) {
    for (const v1::WorkerDescriptor& w : t.workers) placed.push_back({w.rank(), &t, &w, nullptr});
  }
  for (const RankConflict& conflict : selection.conflicts)
    placed.push_back({conflict.rank, nullptr, nullptr, &conflict});
  std::sort(placed.begin(), placed.end(),
            [](const Placed& a, const Placed& b) { return a.rank < b.rank; });
  c.workers.resize(placed.size());
  for (size_t i = 0; i < placed.size(); ++i) {
    WorkerRecord& w = c.record.workers.emplace_back();
    w.worker_index = static_cast<uint32_t>(i);
    w.rank = placed[i].rank;
    w.state = LiveCapture::PhaseName(Phase::kPending);
    c.by_rank[w.rank] = i;
    if (placed[i].conflict != nullptr) {
      w.source = "conflict";
      c.Fail(i, placed[i].conflict->Reason(job));
      continue;
    }
    w.host = placed[i].worker->host().empty() ? placed[i].target->host : placed[i].worker->host();
    w.source = common::StrCat("agent:", placed[i].target->agent_id);
    w.agent_id = placed[i].target->agent_id;
    c.ranks_by_agent[w.agent_id].push_back(w.rank);
  }
}

}  // namespace

absl::StatusOr<std::string> CaptureScheduler::StartBackgroundCapture(CaptureSpec spec) {
  spec.delay_ns = kBackgroundCaptureLeadNs;
  ASSIGN_OR_RETURN(const CaptureRecord capture, StartCapture(spec));
  return capture.id;
}

absl::StatusOr<CaptureRecord> CaptureScheduler::StartCapture(const CaptureSpec& spec) {
  RETURN_IF_ERROR(Validate(spec));
  ASSIGN_OR_RETURN(TargetSelection selection, registry_.SelectTargets(spec.job, spec.ranks));
  const std::vector<CaptureTarget>& targets = selection.targets;
  size_t worker_count = selection.conflicts.size();
  for (const CaptureTarget& t : targets) worker_count += t.workers.size();
  if (worker_count > options_.max_workers_per_capture) {
    return absl::InvalidArgumentError(
        common::StrCat("job \"", spec.job, "\" has ", worker_count, " workers; at most ",
                       options_.max_workers_per_capture, " per capture"));
  }

  const TimeNs now = time_.Now();
  const int64_t lead =
      options_.min_lead_ns + static_cast<int64_t>(targets.size()) * options_.lead_per_agent_ns;
  auto c = std::make_unique<LiveCapture>();
  c->max_events_per_worker = spec.max_events_per_worker ? std::min(spec.max_events_per_worker,
                                                                   options_.max_events_per_worker)
                                                        : options_.max_events_per_worker;
  c->max_upload_bytes = spec.max_upload_bytes
                            ? std::min(spec.max_upload_bytes, options_.max_upload_bytes_per_worker)
                            : options_.max_upload_bytes_per_worker;
  CaptureRecord& r = c->record;
  {
    absl::MutexLock lock(&mu_);
    if (live_.size() >= options_.max_live_captures) {
      return absl::ResourceExhaustedError(
          common::StrCat(live_.size(), " captures are already running; wait for one to finish"));
    }
    r.id = common::StrCat("cap-", now / 1000, "-", next_id_++, options_.id_suffix);
  }
  r.job = spec.job;
  r.state = CaptureState::kPending;
  r.created_ns = r.updated_ns = now;
  r.window_start_ns = now + spec.delay_ns + lead;
  r.window_duration_ns = spec.duration_ns;
  PlaceWorkers(selection, spec.job, *c);

  // Durable before any agent hears of it, so a restart never meets chunks of an unknown capture.
  RETURN_IF_ERROR(store_.PutCapture(r));

  // Size the clock bursts around the window to what this coordinator can serve: within a third
  // of the lead before it, and over the same spread after it.
  const int64_t spread = std::max<int64_t>(lead / 3, 100'000'000);
  const double budget = options_.clock_exchanges_per_second * static_cast<double>(spread) / 1e9;
  c->sync_exchanges = static_cast<uint32_t>(std::clamp<double>(
      budget / static_cast<double>(targets.size()), 1.0, options_.max_sync_exchanges));
  c->sync_spread_ns = spread;
  // Start times in every agent's clock, fitted outside the lock (a fit is not free).
  std::vector<absl::StatusOr<ClockFit>> fits;
  fits.reserve(targets.size());
  for (const CaptureTarget& t : targets) fits.push_back(aligner_.Fit(t.agent_id));

  // The requests are made under the lock but sent outside it: agents acknowledge at once, and
  // their acknowledgements need the lock, as do the clock reports of their bursts. Holding it
  // over a thousand sends would stall every one of them behind the last.
  Outgoing outgoing;
  CaptureRecord snapshot;
  {
    absl::MutexLock lock(&mu_);
    outgoing = Requests(*c, targets, fits);
    c->UpdateState(time_.Now());
    spdlog::info(
        "capture {}: job {} on {} workers of {} agents, starts in {:.1f} ms, {:.1f} ms long", r.id,
        r.job, r.workers.size(), targets.size(), (r.window_start_ns - now) / 1e6,
        r.window_duration_ns / 1e6);
    snapshot = r;
    live_.emplace(r.id, std::move(c));
    ++changes_;  // the loop looks at once
  }
  Send(snapshot.id, outgoing);
  return snapshot;
}

CaptureScheduler::Outgoing CaptureScheduler::Requests(
    LiveCapture& live, const std::vector<CaptureTarget>& targets,
    const std::vector<absl::StatusOr<ClockFit>>& fits) const {
  Outgoing outgoing;
  outgoing.reserve(targets.size());
  for (size_t k = 0; k < targets.size(); ++k) {
    const CaptureTarget& t = targets[k];
    if (!fits[k].ok()) {
      const std::string error =
          common::StrCat("cannot schedule: ", std::string(fits[k].status().message()));
      for (const v1::WorkerDescriptor& w : t.workers) live.Fail(live.by_rank[w.rank()], error);
      continue;
    }
    const TimeNs start = fits[k]->model.ToLocal(live.record.window_start_ns);
    // A burst helps when the model has aged (its bound at the window is mostly drift
    // uncertainty) or is wide. One as tight as the agent's path allows, kept fresh by the
    // clock keeper, needs none: a thousand needless bursts in one lead are what delays acks.
    const int64_t at_window = fits[k]->ErrorBoundAt(start),
                  at_newest = fits[k]->model.error_bound_ns;
    const bool sync_before = at_window > options_.good_enough_bound_ns &&
                             (at_window > 2 * at_newest || at_newest > options_.wide_bound_ns);
    live.sent_start[t.agent_id] = start;
    outgoing.emplace_back(t.agent_id, RequestFor(live, t.agent_id, start, sync_before));
  }
  return outgoing;
}

void CaptureScheduler::Send(const std::string& id, const Outgoing& outgoing) {
  std::vector<const std::string*> unreachable;
  for (const auto& [agent_id, message] : outgoing) {
    if (!registry_.Send(agent_id, message)) unreachable.push_back(&agent_id);
  }
  std::optional<v1::CoordinatorMessage> cancel;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it == live_.end() || it->second->record.state == CaptureState::kCancelled) {
      // Cancelled while the requests were on their way: the cancel may have overtaken them.
      cancel.emplace();
      cancel->mutable_cancel()->set_capture_id(id);
      cancel->mutable_cancel()->set_reason(it == live_.end() ? "cancelled"
                                                             : it->second->record.error);
    } else if (!unreachable.empty()) {
      LiveCapture& live = *it->second;
      for (const std::string* agent_id : unreachable) {
        const std::string error = common::StrCat("agent ", *agent_id, " could not be reached");
        for (int32_t rank : live.ranks_by_agent[*agent_id]) live.Fail(live.by_rank[rank], error);
      }
      live.UpdateState(time_.Now());
    }
  }
  if (cancel) {
    for (const auto& [agent_id, message] : outgoing) registry_.Send(agent_id, *cancel);
  }
}

v1::CoordinatorMessage CaptureScheduler::RequestFor(const LiveCapture& c,
                                                    const std::string& agent_id,
                                                    TimeNs start_agent_ns, bool sync_before) const {
  v1::CoordinatorMessage message;
  v1::CaptureRequest* request = message.mutable_capture();
  request->set_capture_id(c.record.id);
  request->set_job(c.record.job);
  if (auto it = c.ranks_by_agent.find(agent_id); it != c.ranks_by_agent.end()) {
    for (int32_t rank : it->second) request->add_ranks(rank);
  }
  request->set_start_agent_ns(start_agent_ns);
  request->set_duration_ns(c.record.window_duration_ns);
  request->set_max_events_per_worker(c.max_events_per_worker);
  request->set_max_upload_bytes(c.max_upload_bytes);
  request->set_sync_exchanges(sync_before ? c.sync_exchanges : 0);
  request->set_sync_spread_ns(c.sync_spread_ns);
  return message;
}

void CaptureScheduler::OnClockUpdated(const std::string& agent_id) {
  // Cheap check first: most reports concern no capture about to start.
  {
    absl::MutexLock lock(&mu_);
    const TimeNs now = time_.Now();
    const bool any = std::any_of(live_.begin(), live_.end(), [&](const auto& kv) {
      return kv.second->sent_start.count(agent_id) &&
             kv.second->record.window_start_ns - now >= 5'000'000;
    });
    if (!any) return;
  }
  absl::StatusOr<common::ClockModel> model = aligner_.Model(agent_id);
  if (!model.ok()) return;
  absl::MutexLock lock(&mu_);
  const TimeNs now = time_.Now();
  for (auto& [id, c] : live_) {
    // Too close to the start, a moved start could arrive after the old one fired.
    if (c->record.window_start_ns - now < 5'000'000) continue;
    auto sent = c->sent_start.find(agent_id);
    if (sent == c->sent_start.end()) continue;
    const TimeNs start = model->ToLocal(c->record.window_start_ns);
    if (std::llabs(start - sent->second) < 5'000) continue;
    sent->second = start;
    registry_.Send(agent_id, RequestFor(*c, agent_id, start, /*sync_before=*/false));
  }
}

absl::Status CaptureScheduler::Cancel(const std::string& capture_id, const std::string& reason) {
  CaptureRecord final_record;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(capture_id);
    if (it == live_.end()) {
      ASSIGN_OR_RETURN(CaptureRecord stored, store_.GetCapture(capture_id));
      return absl::FailedPreconditionError(common::StrCat("capture ", capture_id, " is already ",
                                                          storage::CaptureStateName(stored.state)));
    }
    LiveCapture& c = *it->second;
    const std::set<std::string> agents = c.Cancel(reason);
    v1::CoordinatorMessage message;
    message.mutable_cancel()->set_capture_id(capture_id);
    message.mutable_cancel()->set_reason(reason);
    for (const std::string& agent : agents) registry_.Send(agent, message);
    final_record = FinalRecord(c);
    live_.erase(it);
  }
  spdlog::info("capture {} cancelled: {}", capture_id, reason);
  DropUnfinishedWorkers(final_record);
  Store(final_record);
  return absl::OkStatus();
}

void CaptureScheduler::OnCaptureStatus(const std::string& agent_id,
                                       const v1::CaptureStatus& status) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(status.capture_id());
  if (it == live_.end()) return;  // finished or unknown: nothing to update
  it->second->ApplyStatus(agent_id, status, time_.Now(), aligner_);
  ++changes_;  // the loop looks at once
}

absl::Status CaptureScheduler::OnChunk(const v1::UploadRequest& chunk) {
  const std::string& id = chunk.capture_id();
  uint32_t worker_index = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it == live_.end()) {
      absl::StatusOr<CaptureRecord> stored = store_.GetCapture(id);
      if (auto r = recent_.find(id); r != recent_.end()) stored = r->second;
      if (!stored.ok()) return absl::NotFoundError(common::StrCat("no capture \"", id, "\""));
      if (stored->state == CaptureState::kComplete || stored->state == CaptureState::kPartial) {
        return absl::OkStatus();  // a late re-send of something already stored
      }
      return absl::FailedPreconditionError(common::StrCat("capture ", id, " is ",
                                                          storage::CaptureStateName(stored->state),
                                                          "; not accepting uploads"));
    }
    LiveCapture& c = *it->second;
    auto at = c.by_rank.find(chunk.rank());
    if (at == c.by_rank.end()) {
      return absl::InvalidArgumentError(
          common::StrCat("rank ", chunk.rank(), " is not part of capture ", id));
    }
    const WorkerRecord& w = c.record.workers[at->second];
    if (w.agent_id != chunk.agent_id()) {
      return absl::PermissionDeniedError(common::StrCat("rank ", chunk.rank(), " of capture ", id,
                                                        " belongs to agent ", w.agent_id, ", not ",
                                                        chunk.agent_id()));
    }
    const Phase p = c.workers[at->second].phase;
    if (p == Phase::kFailed || p == Phase::kCancelled) {
      return absl::FailedPreconditionError(common::StrCat("rank ", chunk.rank(), " of capture ", id,
                                                          " is ", LiveCapture::PhaseName(p)));
    }
    if (p == Phase::kUploaded) return absl::OkStatus();
    if (chunk.sequence() >= (1u << 20))
      return absl::InvalidArgumentError("chunk sequence out of range");
    worker_index = w.worker_index;
  }

  // Decoding validates the chunk (columns, names, enums) before anything is stored.
  common::WorkerTrace trace;
  if (absl::Status s = common::AppendChunk(chunk.chunk(), &trace); !s.ok()) {
    return absl::InvalidArgumentError(common::StrCat("capture ", id, " rank ", chunk.rank(),
                                                     " chunk ", chunk.sequence(), ": ",
                                                     std::string(s.message())));
  }
  const uint64_t events = trace.Counts().Total();
  const uint64_t bytes = chunk.chunk().ByteSizeLong();
  if (absl::Status s = store_.PutChunk(id, worker_index, chunk.sequence(), trace); !s.ok())
    return s;

  std::optional<CaptureRecord> finished;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it != live_.end()) return RecordStoredChunk(*it->second, chunk, events, bytes);
    if (auto r = recent_.find(id); r != recent_.end()) finished = r->second;
  }
  // The capture finished while this chunk was being stored. If its worker failed or was
  // cancelled meanwhile, the finish may have dropped its events before this chunk landed.
  if (!finished) {
    absl::StatusOr<CaptureRecord> stored = store_.GetCapture(id);
    if (absl::IsNotFound(stored.status())) {
      // Deleted meanwhile: this chunk may have landed after its events went.
      return store_.DeleteWorkerEvents(id, worker_index);
    }
    if (!stored.ok()) return absl::OkStatus();
    finished = *std::move(stored);
  }
  const bool dropped =
      worker_index < finished->workers.size() && Unfinished(finished->workers[worker_index]);
  return dropped ? store_.DeleteWorkerEvents(id, worker_index) : absl::OkStatus();
}

absl::Status CaptureScheduler::RecordStoredChunk(LiveCapture& c, const v1::UploadRequest& chunk,
                                                 uint64_t events, uint64_t bytes) {
  ASSIGN_OR_RETURN(bool completed, c.ChunkStored(c.by_rank[chunk.rank()], chunk.sequence(),
                                                 chunk.last(), events, bytes, aligner_));
  if (completed) {
    c.UpdateState(time_.Now());
    ++changes_;  // the loop looks at once
  }
  return absl::OkStatus();
}

bool CaptureScheduler::WorkerComplete(const std::string& capture_id, int32_t rank) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(capture_id);
  if (it == live_.end()) {
    absl::StatusOr<CaptureRecord> stored = store_.GetCapture(capture_id);
    if (auto r = recent_.find(capture_id); r != recent_.end()) stored = r->second;
    if (!stored.ok()) return false;
    for (const WorkerRecord& w : stored->workers) {
      if (w.rank == rank) return w.state == LiveCapture::PhaseName(Phase::kUploaded);
    }
    return false;
  }
  auto at = it->second->by_rank.find(rank);
  if (at == it->second->by_rank.end()) return false;
  const LiveCapture::Worker& w = it->second->workers[at->second];
  return w.phase == Phase::kUploaded || w.chunks_complete;
}

std::optional<CaptureRecord> CaptureScheduler::LiveRecord(const std::string& capture_id) const {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(capture_id);
  if (it != live_.end()) return it->second->record;
  if (auto r = recent_.find(capture_id); r != recent_.end()) {
    CaptureRecord record = r->second;
    // Finished but not stored yet: its clocks may still be refined, so it is not complete to
    // anyone reading it (the analyses would change under them).
    if (storing_.count(capture_id)) record.state = CaptureState::kUploading;
    return record;
  }
  return std::nullopt;
}

size_t CaptureScheduler::LiveCount() const {
  absl::MutexLock lock(&mu_);
  return live_.size();
}

bool CaptureScheduler::HasLiveCapture(const std::string& job) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, c] : live_) {
    if (c->record.job == job) return true;
  }
  return false;
}

void CaptureScheduler::Loop() {
  mu_.Lock();
  TimeNs last_flush = 0;
  // Deadlines are looked at at once after a change, and never more than a tick after the last
  // look: the next wake is a tick after the time the last look used, not after whenever the
  // loop got back to waiting (a clock that jumped meanwhile is looked at again at once). The
  // first look is at once: what changed before this thread first ran (a capture started just
  // after Start(), on a loaded machine) must not wait for the next change or tick.
  TimeNs looked_at = time_.Now() - kTickNs;
  // The changes the last look covered. Read when a look begins, not when the next wait does: a
  // change made while the lock is released below (a last chunk arriving during a store write)
  // must wake the next wait rather than be taken as seen.
  uint64_t seen = changes_;
  const auto woken = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || changes_ != seen;
  };
  while (!stopping_) {
    time_.AwaitUntil(mu_, absl::Condition(&woken), looked_at + kTickNs);
    if (stopping_) break;
    seen = changes_;
    const TimeNs now = time_.Now();
    looked_at = now;
    std::vector<CaptureRecord> finished;
    for (auto it = live_.begin(); it != live_.end();) {
      it->second->CheckDeadlines(
          now,
          {.capture_grace_ns = options_.capture_grace_ns,
           .upload_timeout_ns = options_.upload_timeout_ns},
          [this](const std::string& agent) { return registry_.IsConnected(agent); }, aligner_);
      if (it->second->AllTerminal()) {
        finished.push_back(FinalRecord(*it->second));
        it = live_.erase(it);
      } else {
        ++it;
      }
    }
    std::vector<CaptureRecord> to_flush;
    if (now - last_flush >= options_.flush_interval_ns) {
      last_flush = now;
      for (auto& [id, c] : live_) {
        if (!c->dirty) continue;
        c->dirty = false;
        to_flush.push_back(c->record);
      }
    }
    mu_.Unlock();
    for (const CaptureRecord& r : to_flush) {
      if (absl::Status s = store_.PutCapture(r); !s.ok()) {
        spdlog::error("capture {}: saving progress: {}", r.id, s);
      }
    }
    for (CaptureRecord& r : finished) {
      DropUnfinishedWorkers(r);
      if (options_.refine_with_collectives &&
          (r.state == CaptureState::kComplete || r.state == CaptureState::kPartial)) {
        RefineCaptureClocks(store_, r);
      }
      Store(r);
    }
    mu_.Lock();
  }
  mu_.Unlock();
}

CaptureRecord CaptureScheduler::FinalRecord(LiveCapture& c) {
  CaptureRecord r = c.Finish(time_.Now());
  // Answerable from memory at once (the store follows, after any clock refinement).
  if (recent_.size() >= kRecent) recent_.erase(recent_.begin());
  recent_[r.id] = r;
  storing_.insert(r.id);
  return r;
}

void CaptureScheduler::DropUnfinishedWorkers(CaptureRecord& record) {
  for (const WorkerRecord& w : record.workers) {
    if (!Unfinished(w)) continue;
    if (absl::Status s = store_.DeleteWorkerEvents(record.id, w.worker_index); !s.ok()) {
      spdlog::error("capture {}: dropping what rank {} stored before it {}: {}", record.id, w.rank,
                    w.state, std::string(s.message()));
    }
  }
  // What is on disk now, rather than the sum of every chunk received (after a coordinator
  // restart the agent sends its chunks again).
  if (absl::StatusOr<uint64_t> bytes = store_.ApproximateEventBytes(record.id); bytes.ok())
    record.stored_bytes = *bytes;
}

void CaptureScheduler::Store(const CaptureRecord& record) {
  if (absl::Status s = store_.PutCapture(record); !s.ok()) {
    spdlog::error("capture {}: saving its final record: {}", record.id, s);
  }
  absl::MutexLock lock(&mu_);
  if (recent_.size() >= kRecent && !recent_.count(record.id)) recent_.erase(recent_.begin());
  recent_[record.id] = record;
  storing_.erase(record.id);
}

}  // namespace podscope::coordinator
