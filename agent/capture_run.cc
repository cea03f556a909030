#include "agent/capture_run.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <random>
#include <set>

#include "agent/start_timer.h"
#include "common/chunk_codec.h"
#include "common/str_util.h"
#include "common/trace_slice.h"
#include "podscope/v1/trace.pb.h"
#include "spdlog/spdlog.h"

namespace podscope::agent {

namespace {
bool Terminal(v1::WorkerPhase p) {
  return p == v1::WORKER_PHASE_UPLOADED || p == v1::WORKER_PHASE_FAILED ||
         p == v1::WORKER_PHASE_CANCELLED;
}
}  // namespace

CaptureRun::CaptureRun(v1::CaptureRequest request, std::map<int32_t, Collector*> collectors,
                       std::string agent_id, const AgentClock& clock, CaptureRunHooks hooks,
                       CaptureRunOptions options)
    : request_(std::move(request)),
      collectors_(std::move(collectors)),
      agent_id_(std::move(agent_id)),
      clock_(clock),
      hooks_(std::move(hooks)),
      options_(options),
      start_ns_(request_.start_agent_ns()) {
  if (options_.start_timer == nullptr)
    own_timer_ = std::make_unique<StartTimer>(clock_.host_time());
  timer_ = options_.start_timer != nullptr ? options_.start_timer : own_timer_.get();
  for (int32_t rank : request_.ranks()) {
    v1::WorkerCaptureStatus& w = workers_[rank];
    w.set_rank(rank);
    w.set_phase(v1::WORKER_PHASE_ARMED);
    if (!collectors_.count(rank)) {
      w.set_phase(v1::WORKER_PHASE_FAILED);
      w.set_error(common::StrCat("rank ", rank, " is not served by agent ", agent_id_));
    }
  }
}

CaptureRun::~CaptureRun() {
  Cancel("agent shutting down");
  if (thread_.joinable()) thread_.join();
  UnscheduleStart();  // the timer must not call into a run that is gone
}

void CaptureRun::Begin() {
  thread_ = std::thread([this] { Run(); });
}

bool CaptureRun::MoveStart(TimeNs start_agent_ns) {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || cancelled_ || finished_) return false;
    start_ns_ = start_agent_ns;
  }
  // Rescheduled here, not by the run's thread: a moved start arrives close to the instant, and
  // on a busy host that thread may not wake in time to reschedule it.
  absl::MutexLock lock(&timer_mu_);
  if (timer_id_ != 0) ScheduleStartLocked();
  return true;
}

void CaptureRun::ScheduleStartLocked() {
  if (timer_id_ != 0)
    timer_->Cancel(timer_id_);  // may wait out a StartCollectors, which then sees the move
  const TimeNs wanted = start_ns_.load();
  timer_id_ = timer_->Schedule(clock_.ToHost(wanted), [this, wanted] { StartCollectors(wanted); });
}

void CaptureRun::UnscheduleStart() {
  absl::MutexLock lock(&timer_mu_);
  if (timer_id_ != 0) timer_->Cancel(timer_id_);
  timer_id_ = 0;
}

void CaptureRun::Cancel(std::string reason) {
  absl::MutexLock lock(&mu_);
  if (cancelled_ || finished_) return;
  cancelled_ = true;
  cancel_reason_ = std::move(reason);
}

bool CaptureRun::Cancelled() {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

v1::CaptureStatus CaptureRun::Status() const {
  absl::MutexLock lock(&mu_);
  v1::CaptureStatus status;
  status.set_capture_id(request_.capture_id());
  for (const auto& [rank, w] : workers_) *status.add_workers() = w;
  return status;
}

bool CaptureRun::finished() const {
  absl::MutexLock lock(&mu_);
  return finished_;
}

int64_t CaptureRun::WokeLateNs() const {
  absl::MutexLock lock(&mu_);
  return woke_late_ns_;
}

bool CaptureRun::WaitUntil(TimeNs deadline) {
  absl::MutexLock lock(&mu_);
  return clock_.SleepUntil(deadline, mu_, absl::Condition(&cancelled_));
}

void CaptureRun::SetFailed(int32_t rank, std::string error) {
  absl::MutexLock lock(&mu_);
  v1::WorkerCaptureStatus& w = workers_[rank];
  if (Terminal(w.phase())) return;
  spdlog::warn("capture {} rank {}: {}", request_.capture_id(), rank, error);
  w.set_phase(v1::WORKER_PHASE_FAILED);
  w.set_error(std::move(error));
}

void CaptureRun::SetPhase(int32_t rank, v1::WorkerPhase phase) {
  absl::MutexLock lock(&mu_);
  v1::WorkerCaptureStatus& w = workers_[rank];
  if (!Terminal(w.phase())) w.set_phase(phase);
}

void CaptureRun::Report() {
  if (hooks_.report) hooks_.report(Status());
}

void CaptureRun::FinishCancelled() {
  std::set<Collector*> seen;
  for (const auto& [rank, c] : collectors_) {
    if (seen.insert(c).second) {
      (void)c->Stop(request_.capture_id());
      c->Forget(request_.capture_id());
    }
  }
  {
    absl::MutexLock lock(&mu_);
    for (auto& [rank, w] : workers_) {
      if (Terminal(w.phase())) continue;
      w.set_phase(v1::WORKER_PHASE_CANCELLED);
      w.set_error(cancel_reason_);
    }
    spool_.clear();
    spdlog::info("capture {} cancelled: {}", request_.capture_id(), cancel_reason_);
  }
  // The last status goes up before the run counts as finished, so whoever waits for it sees it.
  Report();
  absl::MutexLock lock(&mu_);
  finished_ = true;
}

void CaptureRun::ArmCollectors(TimeNs first_start) {
  // Which collector serves which of the requested ranks.
  for (int32_t rank : request_.ranks()) {
    if (auto it = collectors_.find(rank); it != collectors_.end())
      by_collector_[it->second].push_back(rank);
  }
  for (auto& [collector, ranks] : by_collector_) {
    CaptureWindow window{request_.capture_id(), ranks, first_start,
                         first_start + request_.duration_ns(), request_.max_events_per_worker()};
    if (absl::Status s = collector->Arm(window); !s.ok()) {
      for (int32_t r : ranks)
        SetFailed(r, common::StrCat("arming the ", collector->name(),
                                    " collector: ", std::string(s.message())));
    }
  }
}

bool CaptureRun::SyncBeforeStart(std::mt19937_64& rng, TimeNs first_start, int64_t spread,
                                 int exchanges) {
  const int64_t lead = std::max<int64_t>(0, first_start - clock_.Now());
  if (!WaitUntil(clock_.Now() +
                 std::uniform_int_distribution<int64_t>(0, std::min(spread, lead / 2))(rng))) {
    return false;
  }
  // Done a tenth of the lead (at least 5 ms) before the start: time for the coordinator to
  // send the start its sharper model gives.
  const TimeNs until = first_start - std::max<int64_t>(lead / 10, 5'000'000);
  if (hooks_.sync_clock && clock_.Now() < until)
    hooks_.sync_clock("before capture", exchanges, until);
  return true;
}

void CaptureRun::StopCollectors() {
  for (auto& [collector, ranks] : by_collector_) {
    if (absl::Status s = collector->Stop(request_.capture_id()); !s.ok()) {
      for (int32_t r : ranks)
        SetFailed(r, common::StrCat("stopping the ", collector->name(),
                                    " collector: ", std::string(s.message())));
    }
  }
  // The window is over: say so now (draining can take a while), so the coordinator holds this
  // worker to the upload deadline rather than the end-of-window one.
  const TimeNs stopped = clock_.Now();
  absl::MutexLock lock(&mu_);
  for (auto& [rank, w] : workers_) {
    if (w.phase() == v1::WORKER_PHASE_CAPTURING) w.set_actual_stop_ns(stopped);
  }
}

// A capture's events were freed in pieces all over the heap; the allocator keeps such pages for
// reuse unless told, and a node agent between captures should be back to its idle size.
void CaptureRun::ReturnFreedMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

void CaptureRun::FinishUploaded() {
  {
    absl::MutexLock lock(&mu_);
    spool_.clear();
    spool_.shrink_to_fit();
    spool_bytes_ = 0;
    if (cancelled_) {
      for (auto& [rank, w] : workers_) {
        if (!Terminal(w.phase()))
          w.set_phase(v1::WORKER_PHASE_CANCELLED), w.set_error(cancel_reason_);
      }
    }
  }
  ReturnFreedMemory();
  Report();
  absl::MutexLock lock(&mu_);
  finished_ = true;
}

void CaptureRun::Run() {
  const std::string& id = request_.capture_id();
  const TimeNs first_start = start_ns_.load();
  ArmCollectors(first_start);
  Report();
  // Every agent of a capture hears of it at once; spreading the bursts over part of the lead
  // (and a little after the window) keeps them from queueing behind one another, and queueing
  // is what clock exchanges measure worst.
  std::mt19937_64 rng(std::hash<std::string>()(agent_id_ + id));
  const int64_t spread = request_.sync_spread_ns() > 0 ? request_.sync_spread_ns() : 100'000'000;
  const int exchanges = static_cast<int>(request_.sync_exchanges());
  if (exchanges > 0 && !SyncBeforeStart(rng, first_start, spread, exchanges))
    return FinishCancelled();

  // The coordinator may move the start once this burst has sharpened its model of our clock.
  // Every worker of every agent on a host starts at the same instant; the run's own thread
  // wakes a few random milliseconds later to report it, so that its waking does not delay the
  // starts of the others.
  const int64_t settle = std::uniform_int_distribution<int64_t>(1'000'000, 20'000'000)(rng);
  TimeNs start = 0;
  if (!AwaitStart(&start, settle)) return FinishCancelled();
  const TimeNs stop = start + request_.duration_ns();
  if (const int64_t late = WokeLateNs(); late > 1'000'000) {
    spdlog::warn(
        "capture {}: started {:.1f} ms after the start time (a busy host, or the burst before the "
        "window overran it)",
        id, late / 1e6);
  }
  if (!WaitUntil(start + settle)) return FinishCancelled();
  Report();

  // While the window runs, what has been recorded goes up every interval.
  const int64_t interval = options_.stream_interval_ns;
  for (TimeNs next = start + (interval > 0 ? interval : request_.duration_ns()); next < stop;
       next += interval) {
    if (!WaitUntil(next)) return FinishCancelled();
    // Not when the stop is near: taking and encoding must not delay it.
    if (stop - clock_.Now() > interval / 4) StreamRecorded(stop);
  }
  if (!WaitUntil(stop)) return FinishCancelled();
  StopCollectors();
  Report();
  // Drain first: collectors may work hard on it (the simulated one does), and an exchange
  // taken while the host is busy is a poor one. The clock samples after the window go up before
  // the status that says it is over, so the coordinator fits this worker's model with them.
  DrainAndSpool();
  if (!WaitUntil(clock_.Now() + std::uniform_int_distribution<int64_t>(0, spread)(rng)))
    return FinishCancelled();
  if (hooks_.sync_clock) hooks_.sync_clock("after capture", std::max(exchanges, 1), 0);
  for (auto& [collector, ranks] : by_collector_) collector->Forget(id);
  Report();
  if (Cancelled()) return FinishCancelled();
  UploadSpool();
  FinishUploaded();
}

bool CaptureRun::AwaitStart(TimeNs* start, int64_t settle_ns) {
  {
    absl::MutexLock lock(&timer_mu_);
    ScheduleStartLocked();  // MoveStart reschedules from here on
  }
  mu_.Lock();
  // Not woken by the start itself (see StartCollectors): asleep until it has settled,
  // following moves.
  while (true) {
    const TimeNs wanted = start_ns_.load();
    const auto moved_or_cancelled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return cancelled_ || start_ns_.load() != wanted;
    };
    if (clock_.SleepUntil(wanted + settle_ns, mu_, absl::Condition(&moved_or_cancelled))) break;
    if (cancelled_) break;
  }
  if (!cancelled_ && !collectors_started_) {
    // The timer is late (a busy host): wait for it.
    const auto started_or_cancelled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return collectors_started_ || cancelled_;
    };
    mu_.Await(absl::Condition(&started_or_cancelled));
  }
  mu_.Unlock();
  UnscheduleStart();  // waits out a StartCollectors under way
  absl::MutexLock lock(&mu_);
  *start = start_ns_.load();
  return collectors_started_;  // when cancelled after the start, the window handles it
}

void CaptureRun::StartCollectors(TimeNs start) {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || cancelled_ || start_ns_.load() != start) return;
    started_ = true;
    woke_late_ns_ = clock_.Now() - start;
  }
  const std::string& id = request_.capture_id();
  for (auto& [collector, ranks] : by_collector_) {
    const absl::Status s = collector->Start(id);
    const TimeNs started = clock_.Now();
    for (int32_t r : ranks) {
      if (!s.ok()) {
        SetFailed(r, common::StrCat("starting the ", collector->name(),
                                    " collector: ", std::string(s.message())));
        continue;
      }
      absl::MutexLock lock(&mu_);
      v1::WorkerCaptureStatus& w = workers_[r];
      if (Terminal(w.phase())) continue;
      w.set_phase(v1::WORKER_PHASE_CAPTURING);
      w.set_actual_start_ns(started);
    }
  }
  absl::MutexLock lock(&mu_);
  // A thousand run threads woken here would queue for the cores behind the timer's next
  // starts; absl wakes only a run whose wait condition now holds, i.e. one already waiting
  // past its settle time.
  collectors_started_ = true;
}

void CaptureRun::StreamRecorded(TimeNs deadline) {
  const std::string& id = request_.capture_id();
  for (const auto& [rank, collector] : collectors_) {
    {
      absl::MutexLock lock(&mu_);
      auto it = workers_.find(rank);
      if (it == workers_.end() || it->second.phase() != v1::WORKER_PHASE_CAPTURING) continue;
    }
    absl::StatusOr<std::vector<common::WorkerTrace>> pieces = collector->TakeRecorded(id, rank);
    if (!pieces.ok()) {
      SetFailed(rank, common::StrCat("taking what was recorded: ",
                                     std::string(pieces.status().message())));
      continue;
    }
    // Pieces without events (a simulated segment with nothing ended yet) are not worth a chunk.
    std::vector<common::WorkerTrace> kept;
    for (common::WorkerTrace& piece : *pieces) {
      if (piece.Counts().Total() > 0) kept.push_back(std::move(piece));
    }
    if (!kept.empty()) (void)Spool(rank, std::move(kept), /*final=*/false);
  }
  // A failed rank's chunks are of no use to anyone: they leave the spool.
  std::set<int32_t> failed;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [rank, w] : workers_)
      if (w.phase() == v1::WORKER_PHASE_FAILED) failed.insert(rank);
  }
  std::erase_if(spool_, [&](const Spooled& c) {
    if (!failed.count(c.rank)) return false;
    spool_bytes_ -= c.bytes.size();
    return true;
  });
  // Offered once: what the coordinator does not store now goes again after the window.
  std::vector<Spooled*> offered;
  std::vector<const std::string*> batch;
  for (Spooled& c : spool_) {
    if (!c.stored) offered.push_back(&c), batch.push_back(&c.bytes);
  }
  if (batch.empty() || clock_.Now() >= deadline) return;
  absl::StatusOr<v1::UploadResponse> response = hooks_.upload(batch, deadline);
  if (!response.ok()) {
    spdlog::warn("capture {}: upload during the window failed (retried after it): {}", id,
                 std::string(response.status().message()));
    return;
  }
  for (Spooled* c : offered) c->stored = true;
}

bool CaptureRun::Spool(int32_t rank, std::vector<common::WorkerTrace> pieces, bool final) {
  const std::string& id = request_.capture_id();
  Sent& sent = sent_[rank];
  if (final && pieces.empty() && sent.chunks > 0) {
    // Everything went up during the window: the last chunk says so, with nothing in it.
    pieces.emplace_back().info = sent.info;
  }
  if (!pieces.empty()) sent.info = pieces.back().info;
  // Each piece is cut, encoded and serialized a chunk at a time and then let go, so the run
  // holds the pieces, one chunk, and the serialized spool.
  uint64_t expected = 0;
  const size_t per_chunk = std::max<size_t>(options_.chunk_events, 1);
  for (const common::WorkerTrace& piece : pieces) {
    const uint64_t n = piece.Counts().Total();
    expected += n == 0 ? 1 : (n + per_chunk - 1) / per_chunk;  // as ForEachChunk cuts
  }
  std::vector<Spooled> chunks;
  uint64_t events = 0, bytes = 0;
  v1::UploadRequest request;
  for (common::WorkerTrace& piece : pieces) {
    events += piece.Counts().Total();
    (void)common::ForEachChunk(piece, options_.chunk_events, [&](common::WorkerTrace part) {
      const uint64_t sequence = sent.chunks + chunks.size();
      request.Clear();
      request.set_capture_id(id);
      request.set_agent_id(agent_id_);
      request.set_rank(rank);
      request.set_sequence(sequence);
      request.set_last(final && chunks.size() + 1 == expected);
      common::EncodeChunk(part, common::ChunkHeader{id, 0, sequence}, request.mutable_chunk());
      part = common::WorkerTrace();
      Spooled& spooled = chunks.emplace_back();
      spooled.rank = rank;
      request.SerializeToString(&spooled.bytes);
      bytes += spooled.bytes.size();
      return absl::OkStatus();
    });
    piece = common::WorkerTrace();
  }
  if (request_.max_upload_bytes() > 0 && sent.bytes + bytes > request_.max_upload_bytes()) {
    SetFailed(rank, common::StrCat(sent.bytes + bytes, " encoded bytes exceed the upload limit of ",
                                   request_.max_upload_bytes(), " per worker"));
    return false;
  }
  if (spool_bytes_ + bytes > options_.max_spool_bytes) {
    SetFailed(rank, common::StrCat("the agent's upload spool is full (", spool_bytes_, " + ", bytes,
                                   " bytes > ", options_.max_spool_bytes,
                                   "); raise --max-spool-bytes or capture less"));
    return false;
  }
  spool_bytes_ += bytes;
  sent.chunks += chunks.size();
  sent.events += events;
  sent.bytes += bytes;
  for (Spooled& c : chunks) spool_.push_back(std::move(c));
  return true;
}

void CaptureRun::DrainAndSpool() {
  const std::string& id = request_.capture_id();
  for (const auto& [rank, collector] : collectors_) {
    {
      absl::MutexLock lock(&mu_);
      auto it = workers_.find(rank);
      if (it == workers_.end() || Terminal(it->second.phase())) continue;
    }
    absl::StatusOr<CollectedWorker> collected = collector->Drain(id, rank);
    if (!collected.ok()) {
      SetFailed(rank, common::StrCat("draining: ", std::string(collected.status().message())));
      continue;
    }
    {
      // Dropped events are worth knowing whether or not the worker failed.
      absl::MutexLock lock(&mu_);
      workers_[rank].set_dropped_events(collected->dropped_events);
      workers_[rank].clear_dropped_reasons();
      for (const auto& [reason, n] : collected->dropped_reasons) {
        v1::DroppedRecords* d = workers_[rank].add_dropped_reasons();
        d->set_reason(reason);
        d->set_count(n);
      }
    }
    if (!collected->error.empty()) {
      SetFailed(rank, collected->error);
      continue;
    }
    if (!Spool(rank, std::move(collected->pieces), /*final=*/true)) continue;
    const Sent& sent = sent_[rank];
    absl::MutexLock lock(&mu_);
    v1::WorkerCaptureStatus& w = workers_[rank];
    w.set_actual_start_ns(collected->actual_start_ns);
    w.set_actual_stop_ns(collected->actual_stop_ns);
    w.set_events(sent.events);
    w.set_chunks(sent.chunks);
    if (!Terminal(w.phase())) w.set_phase(v1::WORKER_PHASE_COLLECTED);
  }
}

void CaptureRun::UploadSpool() {
  std::mt19937_64 rng(std::hash<std::string>()(agent_id_ + request_.capture_id()));
  int64_t backoff = options_.retry_initial_ns;
  const TimeNs give_up = clock_.Now() + options_.upload_give_up_ns;
  std::set<int32_t> pending;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [rank, w] : workers_) {
      if (w.phase() == v1::WORKER_PHASE_COLLECTED) pending.insert(rank);
    }
  }
  int attempt = 0;
  while (!pending.empty()) {
    if (Cancelled()) return;
    // What the coordinator stored during the window goes only if it has lost it since.
    std::vector<const std::string*> batch;
    for (const Spooled& c : spool_) {
      if (pending.count(c.rank) && !c.stored) batch.push_back(&c.bytes);
    }
    ++attempt;
    absl::StatusOr<v1::UploadResponse> response = hooks_.upload(batch, 0);
    if (response.ok()) {
      bool changed = false;
      for (int32_t rank : response->ranks_complete()) {
        if (pending.erase(rank)) SetPhase(rank, v1::WORKER_PHASE_UPLOADED), changed = true;
      }
      if (!pending.empty() && changed) Report();
      if (pending.empty()) break;
      // Accepted but not complete: the coordinator lost state mid-way (a restart); send
      // everything again, what it stored during the window too.
      for (Spooled& c : spool_) c.stored = false;
    } else {
      spdlog::warn("capture {}: upload attempt {} failed: {}", request_.capture_id(), attempt,
                   std::string(response.status().message()));
    }
    if (clock_.Now() > give_up) {
      for (int32_t rank : pending)
        SetFailed(rank, common::StrCat("upload gave up after ", attempt, " attempts"));
      return;
    }
    const int64_t wait = std::uniform_int_distribution<int64_t>(backoff / 2, backoff)(rng);
    if (!WaitUntil(clock_.Now() + wait)) return;
    backoff = std::min(backoff * 2, options_.retry_max_ns);
  }
}

}  // namespace podscope::agent
