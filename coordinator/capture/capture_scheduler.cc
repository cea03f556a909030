#include "coordinator/capture/capture_scheduler.h"

#include <algorithm>
#include <set>

#include "common/chunk_codec.h"
#include "common/str_util.h"
#include "coordinator/clock/collective_refinement.h"
#include "podscope/v1/trace.pb.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {
namespace {

// How often the scheduler looks at deadlines when nothing else wakes it.
constexpr TimeNs kTickNs = 20 * common::kNanosPerMilli;

}  // namespace

using storage::CaptureRecord;
using storage::CaptureState;
using storage::WorkerRecord;

namespace {
constexpr std::string_view kPhaseNames[] = {"pending",  "armed",  "capturing", "collected",
                                            "complete", "failed", "cancelled"};
}  // namespace

std::string_view CaptureScheduler::PhaseName(Phase p) { return kPhaseNames[static_cast<int>(p)]; }

std::optional<CaptureScheduler::Phase> CaptureScheduler::PhaseFromName(std::string_view name) {
  for (size_t i = 0; i < std::size(kPhaseNames); ++i) {
    if (kPhaseNames[i] == name) return static_cast<Phase>(i);
  }
  return std::nullopt;
}

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
      spdlog::error("capture {}: saving its state at shutdown: {}", id, std::string(s.message()));
    }
  }
}

absl::Status CaptureScheduler::Recover() {
  for (CaptureState state : {CaptureState::kPending, CaptureState::kArmed, CaptureState::kCapturing,
                             CaptureState::kUploading}) {
    storage::CaptureFilter filter;
    filter.state = state;
    filter.limit = 100000;
    absl::StatusOr<std::vector<CaptureRecord>> records = store_.ListCaptures(filter);
    if (!records.ok()) return records.status();
    for (CaptureRecord& r : *records) {
      auto c = std::make_unique<LiveCapture>();
      c->max_events_per_worker = options_.max_events_per_worker;
      c->max_upload_bytes = options_.max_upload_bytes_per_worker;
      c->workers.resize(r.workers.size());
      for (size_t i = 0; i < r.workers.size(); ++i) {
        c->by_rank[r.workers[i].rank] = i;
        c->ranks_by_agent[r.workers[i].agent_id].push_back(r.workers[i].rank);
        c->workers[i].phase = PhaseFromName(r.workers[i].state).value_or(Phase::kPending);
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

absl::StatusOr<CaptureRecord> CaptureScheduler::StartCapture(const CaptureSpec& spec) {
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
  const uint64_t max_events = spec.max_events_per_worker ? std::min(spec.max_events_per_worker,
                                                                    options_.max_events_per_worker)
                                                         : options_.max_events_per_worker;
  const uint64_t max_bytes =
      spec.max_upload_bytes ? std::min(spec.max_upload_bytes, options_.max_upload_bytes_per_worker)
                            : options_.max_upload_bytes_per_worker;
  absl::StatusOr<TargetSelection> selection = registry_.SelectTargets(spec.job, spec.ranks);
  if (!selection.ok()) return selection.status();
  const std::vector<CaptureTarget>* targets = &selection->targets;
  size_t worker_count = selection->conflicts.size();
  for (const CaptureTarget& t : *targets) worker_count += t.workers.size();
  if (worker_count > options_.max_workers_per_capture) {
    return absl::InvalidArgumentError(
        common::StrCat("job \"", spec.job, "\" has ", worker_count, " workers; at most ",
                       options_.max_workers_per_capture, " per capture"));
  }

  const TimeNs now = time_.Now();
  const int64_t lead =
      options_.min_lead_ns + static_cast<int64_t>(targets->size()) * options_.lead_per_agent_ns;
  auto c = std::make_unique<LiveCapture>();
  c->max_events_per_worker = max_events;
  c->max_upload_bytes = max_bytes;
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

  // Workers in rank order; their index is their key in the store.
  // A rank several agents claim is a worker of the capture that fails at once, with the reason.
  struct Placed {
    int32_t rank;
    const CaptureTarget* target;         // null for a conflict
    const v1::WorkerDescriptor* worker;  // null for a conflict
    const RankConflict* conflict;
  };
  std::vector<Placed> placed;
  for (const CaptureTarget& t : *targets) {
    for (const v1::WorkerDescriptor& w : t.workers) placed.push_back({w.rank(), &t, &w, nullptr});
  }
  for (const RankConflict& conflict : selection->conflicts)
    placed.push_back({conflict.rank, nullptr, nullptr, &conflict});
  std::sort(placed.begin(), placed.end(),
            [](const Placed& a, const Placed& b) { return a.rank < b.rank; });
  c->workers.resize(placed.size());
  for (size_t i = 0; i < placed.size(); ++i) {
    WorkerRecord& w = r.workers.emplace_back();
    w.worker_index = static_cast<uint32_t>(i);
    w.rank = placed[i].rank;
    w.state = PhaseName(Phase::kPending);
    c->by_rank[w.rank] = i;
    if (placed[i].conflict != nullptr) {
      w.source = "conflict";
      absl::MutexLock lock(&mu_);  // not shared yet; Fail's contract is the lock all the same
      Fail(*c, i, placed[i].conflict->Reason(spec.job));
      continue;
    }
    w.host = placed[i].worker->host().empty() ? placed[i].target->host : placed[i].worker->host();
    w.source = common::StrCat("agent:", placed[i].target->agent_id);
    w.agent_id = placed[i].target->agent_id;
    c->ranks_by_agent[w.agent_id].push_back(w.rank);
  }

  // Durable before any agent hears of it, so a restart never meets chunks of an unknown capture.
  if (absl::Status s = store_.PutCapture(r); !s.ok()) return s;

  // Size the clock bursts around the window to what this coordinator can serve: within a third
  // of the lead before it, and over the same spread after it.
  const int64_t spread = std::max<int64_t>(lead / 3, 100'000'000);
  const double budget = options_.clock_exchanges_per_second * static_cast<double>(spread) / 1e9;
  c->sync_exchanges = static_cast<uint32_t>(std::clamp<double>(
      budget / static_cast<double>(targets->size()), 1.0, options_.max_sync_exchanges));
  c->sync_spread_ns = spread;
  // Start times in every agent's clock, fitted outside the lock (a fit is not free).
  std::vector<absl::StatusOr<ClockFit>> fits;
  fits.reserve(targets->size());
  for (const CaptureTarget& t : *targets) fits.push_back(aligner_.Fit(t.agent_id));

  // The requests are made under the lock but sent outside it: agents acknowledge at once, and
  // their acknowledgements need the lock, as do the clock reports of their bursts. Holding it
  // over a thousand sends would stall every one of them behind the last.
  std::vector<std::pair<const std::string*, v1::CoordinatorMessage>> outgoing;
  outgoing.reserve(targets->size());
  CaptureRecord snapshot;
  const std::string id = r.id;
  {
    absl::MutexLock lock(&mu_);
    LiveCapture& live = *c;
    for (size_t k = 0; k < targets->size(); ++k) {
      const CaptureTarget& t = (*targets)[k];
      if (!fits[k].ok()) {
        const std::string error =
            common::StrCat("cannot schedule: ", std::string(fits[k].status().message()));
        for (const v1::WorkerDescriptor& w : t.workers) Fail(live, live.by_rank[w.rank()], error);
        continue;
      }
      const TimeNs start = fits[k]->model.ToLocal(r.window_start_ns);
      // A burst helps when the model has aged (its bound at the window is mostly drift
      // uncertainty) or is wide. One as tight as the agent's path allows, kept fresh by the
      // clock keeper, needs none: a thousand needless bursts in one lead are what delays acks.
      const int64_t at_window = fits[k]->ErrorBoundAt(start),
                    at_newest = fits[k]->model.error_bound_ns;
      const bool sync_before = at_window > options_.good_enough_bound_ns &&
                               (at_window > 2 * at_newest || at_newest > options_.wide_bound_ns);
      live.sent_start[t.agent_id] = start;
      outgoing.emplace_back(&t.agent_id, RequestFor(live, t.agent_id, start, sync_before));
    }
    UpdateCaptureState(live);
    spdlog::info(
        "capture {}: job {} on {} workers of {} agents, starts in {:.1f} ms, {:.1f} ms long", r.id,
        r.job, r.workers.size(), targets->size(), (r.window_start_ns - now) / 1e6,
        r.window_duration_ns / 1e6);
    snapshot = r;
    live_.emplace(r.id, std::move(c));
    ++changes_;  // the loop looks at once
  }
  std::vector<const std::string*> unreachable;
  for (const auto& [agent_id, message] : outgoing) {
    if (!registry_.Send(*agent_id, message)) unreachable.push_back(agent_id);
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
        for (int32_t rank : live.ranks_by_agent[*agent_id]) Fail(live, live.by_rank[rank], error);
      }
      UpdateCaptureState(live);
    }
  }
  if (cancel) {
    for (const auto& [agent_id, message] : outgoing) registry_.Send(*agent_id, *cancel);
  }
  return snapshot;
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
      absl::StatusOr<CaptureRecord> stored = store_.GetCapture(capture_id);
      if (!stored.ok()) return stored.status();
      return absl::FailedPreconditionError(common::StrCat(
          "capture ", capture_id, " is already ", storage::CaptureStateName(stored->state)));
    }
    LiveCapture& c = *it->second;
    std::set<std::string> agents;
    for (size_t i = 0; i < c.workers.size(); ++i) {
      const Phase p = c.workers[i].phase;
      if (p == Phase::kUploaded || p == Phase::kFailed || p == Phase::kCancelled) continue;
      agents.insert(c.record.workers[i].agent_id);
      SetPhase(c, i, Phase::kCancelled);
      c.record.workers[i].error = reason;
    }
    v1::CoordinatorMessage message;
    message.mutable_cancel()->set_capture_id(capture_id);
    message.mutable_cancel()->set_reason(reason);
    for (const std::string& agent : agents) registry_.Send(agent, message);
    c.record.state = CaptureState::kCancelled;
    c.record.error = reason;
    final_record = FinalRecord(c);
    live_.erase(it);
  }
  spdlog::info("capture {} cancelled: {}", capture_id, reason);
  Store(final_record);
  return absl::OkStatus();
}

void CaptureScheduler::Fail(LiveCapture& c, size_t i, std::string error) {
  const Phase p = c.workers[i].phase;
  if (p == Phase::kUploaded || p == Phase::kFailed || p == Phase::kCancelled) return;
  WorkerRecord& w = c.record.workers[i];
  spdlog::warn("capture {}: rank {} ({}) failed: {}", c.record.id, w.rank, w.host, error);
  w.error = std::move(error);
  SetPhase(c, i, Phase::kFailed);
}

void CaptureScheduler::SetPhase(LiveCapture& c, size_t i, Phase phase) {
  c.workers[i].phase = phase;
  c.record.workers[i].state = PhaseName(phase);
  c.dirty = true;
}

bool CaptureScheduler::AllTerminal(const LiveCapture& c) const {
  return std::all_of(c.workers.begin(), c.workers.end(), [](const LiveWorker& w) {
    return w.phase == Phase::kUploaded || w.phase == Phase::kFailed || w.phase == Phase::kCancelled;
  });
}

void CaptureScheduler::UpdateCaptureState(LiveCapture& c) {
  // The capture is as far along as its slowest live worker, and no further than the clock says.
  const TimeNs now = time_.Now();
  CaptureState state = CaptureState::kUploading;
  bool any_live = false;
  for (const LiveWorker& w : c.workers) {
    if (w.phase == Phase::kPending) state = std::min(state, CaptureState::kPending);
    if (w.phase == Phase::kArmed) state = std::min(state, CaptureState::kArmed);
    if (w.phase == Phase::kCapturing) state = std::min(state, CaptureState::kCapturing);
    any_live |= w.phase != Phase::kFailed && w.phase != Phase::kCancelled;
  }
  if (any_live && state == CaptureState::kArmed && now >= c.record.window_start_ns)
    state = CaptureState::kCapturing;
  if (state != c.record.state) {
    c.record.state = state;
    c.record.updated_ns = now;
    c.dirty = true;
  }
}

void CaptureScheduler::OnCaptureStatus(const std::string& agent_id,
                                       const v1::CaptureStatus& status) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(status.capture_id());
  if (it == live_.end()) return;  // finished or unknown: nothing to update
  LiveCapture& c = *it->second;
  for (const v1::WorkerCaptureStatus& ws : status.workers()) {
    auto at = c.by_rank.find(ws.rank());
    if (at == c.by_rank.end()) continue;
    const size_t i = at->second;
    WorkerRecord& w = c.record.workers[i];
    if (w.agent_id != agent_id) continue;  // another agent's worker: ignore
    const Phase current = c.workers[i].phase;
    // Converts agent-clock instants with the agent's model (frozen once the window is over).
    auto aligned = [&](TimeNs agent_ns) -> TimeNs {
      if (agent_ns == 0) return 0;
      if (w.clock.source != common::ClockSource::kNone) return w.clock.ToAligned(agent_ns);
      absl::StatusOr<common::ClockModel> m = aligner_.Model(agent_id);
      return m.ok() ? m->ToAligned(agent_ns) : agent_ns;
    };
    // Uploads travel on their own streams and can overtake the status saying the window is
    // over: a worker already uploaded still takes its window and counts from it.
    if (current == Phase::kUploaded && w.actual_stop_ns == 0 &&
        (ws.phase() == v1::WORKER_PHASE_COLLECTED || ws.phase() == v1::WORKER_PHASE_UPLOADED)) {
      w.actual_start_ns = aligned(ws.actual_start_ns());
      w.actual_stop_ns = aligned(ws.actual_stop_ns());
      w.events = ws.events();
      w.dropped_events = ws.dropped_events();
      c.dirty = true;
    }
    if (current == Phase::kUploaded || current == Phase::kFailed || current == Phase::kCancelled)
      continue;
    if (w.acknowledged_ns == 0) w.acknowledged_ns = time_.Now();
    switch (ws.phase()) {
      case v1::WORKER_PHASE_ARMED:
        if (current == Phase::kPending) SetPhase(c, i, Phase::kArmed);
        break;
      case v1::WORKER_PHASE_CAPTURING:
        if (current < Phase::kCapturing) {
          w.actual_start_ns = aligned(ws.actual_start_ns());
          SetPhase(c, i, Phase::kCapturing);
        }
        if (ws.actual_stop_ns() != 0) c.workers[i].stopped = true;
        break;
      case v1::WORKER_PHASE_COLLECTED:
      case v1::WORKER_PHASE_UPLOADED:
        if (current < Phase::kCollected) {
          // The agent synchronised right after the window and sent the samples before this
          // status: the model now brackets the window. Freeze it for this worker.
          FreezeClock(c, i);
          w.actual_start_ns = aligned(ws.actual_start_ns());
          w.actual_stop_ns = aligned(ws.actual_stop_ns());
          w.events = ws.events();
          w.chunks = ws.chunks();
          w.dropped_events = ws.dropped_events();
          SetPhase(c, i, Phase::kCollected);
        }
        // UPLOADED is sent only after this coordinator (or one before a restart) acknowledged
        // every chunk, so it is trusted.
        if (ws.phase() == v1::WORKER_PHASE_UPLOADED) {
          c.workers[i].chunks_complete = true;
          CompleteIfAligned(c, i, false);
        }
        break;
      case v1::WORKER_PHASE_FAILED:
        w.dropped_events = ws.dropped_events();
        Fail(c, i, ws.error().empty() ? "failed on the agent" : ws.error());
        break;
      case v1::WORKER_PHASE_CANCELLED:
        w.error = ws.error();
        SetPhase(c, i, Phase::kCancelled);
        break;
      default:
        break;
    }
  }
  UpdateCaptureState(c);
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
      return absl::FailedPreconditionError(
          common::StrCat("rank ", chunk.rank(), " of capture ", id, " is ", PhaseName(p)));
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

  absl::MutexLock lock(&mu_);
  auto it = live_.find(id);
  if (it == live_.end()) return absl::OkStatus();
  LiveCapture& c = *it->second;
  const size_t i = c.by_rank[chunk.rank()];
  LiveWorker& lw = c.workers[i];
  if (lw.received.size() <= chunk.sequence()) lw.received.resize(chunk.sequence() + 1);
  if (!lw.received[chunk.sequence()]) {
    lw.received[chunk.sequence()] = true;
    ++lw.received_count;
    lw.received_bytes += bytes;
    lw.received_events += events;
    c.record.stored_bytes += bytes;
    c.record.events += events;
  }
  if (chunk.last()) lw.expected = chunk.sequence() + 1;
  if (lw.received_bytes > c.max_upload_bytes) {
    Fail(c, i,
         common::StrCat("upload exceeds the limit of ", c.max_upload_bytes, " bytes per worker"));
    return absl::ResourceExhaustedError(c.record.workers[i].error);
  }
  if (lw.expected && lw.received_count == *lw.expected && !lw.chunks_complete) {
    // Chunks can overtake the status saying the window is over (e.g. after a coordinator
    // restart): the clock model is frozen now, or as soon as the agent's samples arrive.
    lw.chunks_complete = true;
    c.record.workers[i].chunks = *lw.expected;
    // What is stored is what counts, even before the agent's status (which says the same)
    // arrives: a capture complete on its chunks never shows a worker with no events.
    c.record.workers[i].events = lw.received_events;
    CompleteIfAligned(c, i, false);
    UpdateCaptureState(c);
    ++changes_;  // the loop looks at once
  }
  c.dirty = true;
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
      if (w.rank == rank) return w.state == PhaseName(Phase::kUploaded);
    }
    return false;
  }
  auto at = it->second->by_rank.find(rank);
  if (at == it->second->by_rank.end()) return false;
  const LiveWorker& w = it->second->workers[at->second];
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

void CaptureScheduler::CheckDeadlines(LiveCapture& c, TimeNs now) {
  const TimeNs start = c.record.window_start_ns;
  const TimeNs stop = start + c.record.window_duration_ns;
  const bool may_fail = now >= c.deadlines_from_ns;
  for (size_t i = 0; i < c.workers.size(); ++i) {
    const Phase p = c.workers[i].phase;
    if (c.workers[i].chunks_complete) {
      CompleteIfAligned(c, i, may_fail && now >= stop + options_.upload_timeout_ns);
      continue;
    }
    if (!may_fail) continue;
    const std::string& agent = c.record.workers[i].agent_id;
    const char* gone = registry_.IsConnected(agent) ? "" : " (disconnected)";
    if (p == Phase::kPending && now >= start) {
      Fail(c, i,
           common::StrCat("agent ", agent, gone,
                          " did not acknowledge the capture before its start time"));
    } else if ((p == Phase::kPending || p == Phase::kArmed || p == Phase::kCapturing) &&
               !c.workers[i].stopped && now >= stop + options_.capture_grace_ns) {
      Fail(c, i,
           common::StrCat("agent ", agent, gone, " did not report the end of the window within ",
                          options_.capture_grace_ns / 1'000'000, " ms of it"));
    } else if ((p == Phase::kCollected || c.workers[i].stopped) &&
               now >= stop + options_.upload_timeout_ns) {
      Fail(c, i,
           common::StrCat("agent ", agent, gone, " did not finish uploading within ",
                          options_.upload_timeout_ns / 1'000'000, " ms of the window's end (",
                          c.workers[i].received_count, " chunks stored)"));
    }
  }
  UpdateCaptureState(c);
}

void CaptureScheduler::Loop() {
  mu_.Lock();
  TimeNs last_flush = 0;
  // Deadlines are looked at at once after a change, and never more than a tick after the last
  // look: the next wake is a tick after the time the last look used, not after whenever the
  // loop got back to waiting (a clock that jumped meanwhile is looked at again at once).
  TimeNs looked_at = time_.Now();
  while (!stopping_) {
    const uint64_t seen = changes_;
    const auto woken = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || changes_ != seen;
    };
    time_.AwaitUntil(mu_, absl::Condition(&woken), looked_at + kTickNs);
    if (stopping_) break;
    const TimeNs now = time_.Now();
    looked_at = now;
    std::vector<CaptureRecord> finished;
    for (auto it = live_.begin(); it != live_.end();) {
      CheckDeadlines(*it->second, now);
      if (AllTerminal(*it->second)) {
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
        spdlog::error("capture {}: saving progress: {}", r.id, std::string(s.message()));
      }
    }
    for (CaptureRecord& r : finished) {
      if (options_.refine_with_collectives &&
          (r.state == CaptureState::kComplete || r.state == CaptureState::kPartial)) {
        RefineClocks(r);
      }
      Store(r);
    }
    mu_.Lock();
  }
  mu_.Unlock();
}

bool CaptureScheduler::FreezeClock(LiveCapture& c, size_t i) {
  WorkerRecord& w = c.record.workers[i];
  absl::StatusOr<ClockFit> fit = aligner_.Fit(w.agent_id);
  if (!fit.ok()) return false;
  w.clock = fit->model;
  // The bound that holds over the whole window, wherever it lies against the samples.
  const TimeNs start = fit->model.ToLocal(c.record.window_start_ns);
  const TimeNs stop = fit->model.ToLocal(c.record.window_start_ns + c.record.window_duration_ns);
  w.clock.error_bound_ns = std::max(fit->ErrorBoundAt(start), fit->ErrorBoundAt(stop));
  return true;
}

void CaptureScheduler::CompleteIfAligned(LiveCapture& c, size_t i, bool deadline_passed) {
  LiveWorker& lw = c.workers[i];
  if (!lw.chunks_complete || lw.phase == Phase::kUploaded || lw.phase == Phase::kFailed ||
      lw.phase == Phase::kCancelled) {
    return;
  }
  WorkerRecord& w = c.record.workers[i];
  if (w.clock.source == common::ClockSource::kNone && !FreezeClock(c, i) && !deadline_passed)
    return;
  if (w.clock.source == common::ClockSource::kNone) {
    w.error = common::StrCat("agent ", w.agent_id,
                             " never synchronised its clock; events are on its own clock");
  }
  SetPhase(c, i, Phase::kUploaded);
}

CaptureRecord CaptureScheduler::FinalRecord(LiveCapture& c) {
  CaptureRecord& r = c.record;
  size_t uploaded = 0, failed = 0;
  std::string failures;
  for (size_t i = 0; i < c.workers.size(); ++i) {
    WorkerRecord& w = r.workers[i];
    if (c.workers[i].phase == Phase::kUploaded) {
      ++uploaded;
    } else if (c.workers[i].phase == Phase::kFailed) {
      if (failed++ < 5)
        common::StrAppend(&failures, failures.empty() ? "" : "; ", "rank ", w.rank, " (", w.host,
                          "): ", w.error);
    }
  }
  if (r.state != CaptureState::kCancelled) {
    r.state = uploaded == c.workers.size() ? CaptureState::kComplete
              : uploaded > 0               ? CaptureState::kPartial
                                           : CaptureState::kFailed;
    if (failed > 0)
      r.error = common::StrCat(failed, " of ", c.workers.size(), " workers failed: ", failures,
                               failed > 5 ? "; ..." : "");
  }
  r.updated_ns = time_.Now();
  ++r.generation;
  // Answerable from memory at once (the store follows, after any clock refinement).
  if (recent_.size() >= kRecent) recent_.erase(recent_.begin());
  recent_[r.id] = r;
  storing_.insert(r.id);
  spdlog::info("capture {} {}: {} of {} workers uploaded, {} events{}{}", r.id,
               storage::CaptureStateName(r.state), uploaded, c.workers.size(), r.events,
               r.error.empty() ? "" : "; ", r.error);
  return r;
}

void CaptureScheduler::Store(const CaptureRecord& record) {
  if (absl::Status s = store_.PutCapture(record); !s.ok()) {
    spdlog::error("capture {}: saving its final record: {}", record.id, std::string(s.message()));
  }
  absl::MutexLock lock(&mu_);
  if (recent_.size() >= kRecent && !recent_.count(record.id)) recent_.erase(recent_.begin());
  recent_[record.id] = record;
  storing_.erase(record.id);
}

void CaptureScheduler::RefineClocks(CaptureRecord& record) {
  std::map<uint32_t, size_t> by_index;
  std::set<std::string> agents;
  for (size_t i = 0; i < record.workers.size(); ++i) {
    by_index[record.workers[i].worker_index] = i;
    if (record.workers[i].clock.source == common::ClockSource::kNetwork)
      agents.insert(record.workers[i].agent_id);
  }
  if (agents.size() < 2) return;
  // The stored events with this (not yet stored) record's network models.
  common::Capture capture;
  std::vector<std::string> domain_by_rank_order;
  absl::Status read = store_.ReadWorkers(record.id, [&](uint32_t index, common::WorkerTrace trace) {
    auto it = by_index.find(index);
    if (it == by_index.end()) return absl::OkStatus();
    trace.clock = record.workers[it->second].clock;
    capture.workers.push_back(std::move(trace));
    return absl::OkStatus();
  });
  if (!read.ok()) {
    spdlog::warn("capture {}: clock refinement skipped: {}", record.id,
                 std::string(read.message()));
    return;
  }
  std::map<int32_t, std::string> agent_of_rank;
  for (const WorkerRecord& w : record.workers) agent_of_rank[w.rank] = w.agent_id;
  const common::CaptureView view(capture);
  std::vector<std::string> domains;
  for (size_t i = 0; i < view.size(); ++i)
    domains.push_back(agent_of_rank[view.worker(i).info.rank]);
  std::map<std::string, DomainCorrection> applied;
  size_t few_matches = 0;
  for (DomainCorrection& c : RefineWithCollectives(view, domains)) {
    if (c.applied && !c.domain.empty()) applied.emplace(c.domain, c);
    few_matches += c.matches < CollectiveRefinementOptions().min_matches;
  }
  if (applied.empty()) {
    spdlog::info(
        "capture {}: network clock models kept: of {} agents, {} share too few collectives and the "
        "others' "
        "corrections exceed their network bounds",
        record.id, agents.size(), few_matches);
    return;
  }
  ++record.generation;  // cached analyses of the network-aligned capture are stale now
  int64_t largest = 0;
  for (WorkerRecord& w : record.workers) {
    auto it = applied.find(w.agent_id);
    if (it == applied.end() || w.clock.source != common::ClockSource::kNetwork) continue;
    const common::ClockModel network = w.clock;
    w.clock.offset_ns += it->second.correction_ns;
    w.clock.drift_ppb += it->second.drift_correction_ppb;
    w.clock.source = common::ClockSource::kCollective;
    // The window as the worker saw it, on the refined clock.
    for (int64_t* t : {&w.actual_start_ns, &w.actual_stop_ns}) {
      if (*t != 0) *t = w.clock.ToAligned(network.ToLocal(*t));
    }
    // Relative to the pod's common clock, which is what comparing workers needs; the pod as a
    // whole stays where the network placed it.
    w.clock.error_bound_ns = 3 * it->second.spread_ns + 1'000;
    largest = std::max<int64_t>(largest, std::llabs(it->second.correction_ns));
  }
  spdlog::info(
      "capture {}: clocks of {} agents refined from collectives (largest correction {:.1f} us)",
      record.id, applied.size(), largest / 1e3);
}

}  // namespace podscope::coordinator
