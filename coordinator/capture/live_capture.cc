#include "coordinator/capture/live_capture.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "common/dropped_records.h"
#include "common/ranges.h"
#include "common/str_util.h"
#include "coordinator/clock/capture_clocks.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {
namespace {

std::map<std::string, uint64_t> DroppedReasons(const v1::WorkerCaptureStatus& ws) {
  return common::BoundedDroppedReasons(ws.dropped_reasons());
}

constexpr std::string_view kPhaseNames[] = {"pending",  "armed",  "capturing", "collected",
                                            "complete", "failed", "cancelled"};

}  // namespace

using storage::CaptureRecord;
using storage::CaptureState;
using storage::WorkerRecord;

std::string_view LiveCapture::PhaseName(Phase p) { return kPhaseNames[static_cast<int>(p)]; }

std::optional<LiveCapture::Phase> LiveCapture::PhaseFromName(std::string_view name) {
  for (size_t i = 0; i < std::size(kPhaseNames); ++i) {
    if (kPhaseNames[i] == name) return static_cast<Phase>(i);
  }
  return std::nullopt;
}

bool LiveCapture::Terminal(size_t i) const {
  const Phase p = workers[i].phase;
  return p == Phase::kUploaded || p == Phase::kFailed || p == Phase::kCancelled;
}

bool LiveCapture::AllTerminal() const {
  for (size_t i = 0; i < workers.size(); ++i) {
    if (!Terminal(i)) return false;
  }
  return true;
}

void LiveCapture::SetPhase(size_t i, Phase phase) {
  workers[i].phase = phase;
  record.workers[i].state = PhaseName(phase);
  dirty = true;
}

void LiveCapture::Fail(size_t i, std::string error) {
  if (Terminal(i)) return;
  WorkerRecord& w = record.workers[i];
  spdlog::warn("capture {}: rank {} ({}) failed: {}", record.id, w.rank, w.host, error);
  w.error = std::move(error);
  SetPhase(i, Phase::kFailed);
}

void LiveCapture::UpdateState(TimeNs now) {
  CaptureState state = CaptureState::kUploading;
  bool any_live = false;
  for (const Worker& w : workers) {
    if (w.phase == Phase::kPending) state = std::min(state, CaptureState::kPending);
    if (w.phase == Phase::kArmed) state = std::min(state, CaptureState::kArmed);
    if (w.phase == Phase::kCapturing) state = std::min(state, CaptureState::kCapturing);
    any_live |= w.phase != Phase::kFailed && w.phase != Phase::kCancelled;
  }
  if (any_live && state == CaptureState::kArmed && now >= record.window_start_ns)
    state = CaptureState::kCapturing;
  if (state != record.state) {
    record.state = state;
    record.updated_ns = now;
    dirty = true;
  }
}

void LiveCapture::ApplyStatus(const std::string& agent_id, const v1::CaptureStatus& status,
                              TimeNs now, const ClockAligner& aligner) {
  for (const v1::WorkerCaptureStatus& ws : status.workers()) {
    auto at = by_rank.find(ws.rank());
    if (at == by_rank.end()) continue;
    const size_t i = at->second;
    WorkerRecord& w = record.workers[i];
    if (w.agent_id != agent_id) continue;  // another agent's worker: ignore
    const Phase current = workers[i].phase;
    // Converts agent-clock instants with the agent's model (frozen once the window is over).
    auto aligned = [&](TimeNs agent_ns) -> TimeNs {
      if (agent_ns == 0) return 0;
      if (w.clock.source != common::ClockSource::kNone) return w.clock.ToAligned(agent_ns);
      absl::StatusOr<common::ClockModel> m = aligner.Model(agent_id);
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
      w.dropped_reasons = DroppedReasons(ws);
      dirty = true;
    }
    if (Terminal(i)) continue;
    if (w.acknowledged_ns == 0) w.acknowledged_ns = now;
    switch (ws.phase()) {
      case v1::WORKER_PHASE_ARMED:
        if (current == Phase::kPending) SetPhase(i, Phase::kArmed);
        break;
      case v1::WORKER_PHASE_CAPTURING:
        if (current < Phase::kCapturing) {
          w.actual_start_ns = aligned(ws.actual_start_ns());
          SetPhase(i, Phase::kCapturing);
        }
        if (ws.actual_stop_ns() != 0) workers[i].stopped = true;
        break;
      case v1::WORKER_PHASE_COLLECTED:
      case v1::WORKER_PHASE_UPLOADED:
        if (current < Phase::kCollected) {
          // The agent synchronised right after the window and sent the samples before this
          // status: the model now brackets the window. Freeze it for this worker.
          FreezeClock(i, aligner);
          w.actual_start_ns = aligned(ws.actual_start_ns());
          w.actual_stop_ns = aligned(ws.actual_stop_ns());
          w.events = ws.events();
          w.chunks = ws.chunks();
          w.dropped_events = ws.dropped_events();
          w.dropped_reasons = DroppedReasons(ws);
          SetPhase(i, Phase::kCollected);
        }
        // UPLOADED is sent only after this coordinator (or one before a restart) acknowledged
        // every chunk, so it is trusted.
        if (ws.phase() == v1::WORKER_PHASE_UPLOADED) {
          workers[i].chunks_complete = true;
          CompleteIfAligned(i, false, aligner);
        }
        break;
      case v1::WORKER_PHASE_FAILED:
        w.dropped_events = ws.dropped_events();
        w.dropped_reasons = DroppedReasons(ws);
        Fail(i, ws.error().empty() ? "failed on the agent" : ws.error());
        break;
      case v1::WORKER_PHASE_CANCELLED:
        w.error = ws.error();
        SetPhase(i, Phase::kCancelled);
        break;
      default:
        break;
    }
  }
  UpdateState(now);
}

absl::StatusOr<bool> LiveCapture::ChunkStored(size_t i, uint64_t sequence, bool last,
                                              uint64_t events, uint64_t bytes,
                                              const ClockAligner& aligner) {
  Worker& lw = workers[i];
  if (lw.received.size() <= sequence) lw.received.resize(sequence + 1);
  if (!lw.received[sequence]) {
    lw.received[sequence] = true;
    ++lw.received_count;
    lw.received_bytes += bytes;
    lw.received_events += events;
    record.stored_bytes += bytes;
    record.events += events;
  }
  dirty = true;
  if (last) lw.expected = sequence + 1;
  if (lw.received_bytes > max_upload_bytes) {
    Fail(i, common::StrCat("upload exceeds the limit of ", max_upload_bytes, " bytes per worker"));
    return absl::ResourceExhaustedError(record.workers[i].error);
  }
  if (!lw.expected || lw.received_count != *lw.expected || lw.chunks_complete) return false;
  // Chunks can overtake the status saying the window is over (e.g. after a coordinator
  // restart): the clock model is frozen now, or as soon as the agent's samples arrive.
  lw.chunks_complete = true;
  record.workers[i].chunks = *lw.expected;
  // What is stored is what counts, even before the agent's status (which says the same)
  // arrives: a capture complete on its chunks never shows a worker with no events.
  record.workers[i].events = lw.received_events;
  CompleteIfAligned(i, false, aligner);
  return true;
}

void LiveCapture::CheckDeadlines(TimeNs now, const CaptureDeadlines& deadlines,
                                 const std::function<bool(const std::string&)>& connected,
                                 const ClockAligner& aligner) {
  const TimeNs start = record.window_start_ns;
  const TimeNs stop = start + record.window_duration_ns;
  const bool may_fail = now >= deadlines_from_ns;
  for (size_t i = 0; i < workers.size(); ++i) {
    const Phase p = workers[i].phase;
    if (workers[i].chunks_complete) {
      CompleteIfAligned(i, may_fail && now >= stop + deadlines.upload_timeout_ns, aligner);
      continue;
    }
    if (!may_fail) continue;
    const std::string& agent = record.workers[i].agent_id;
    const char* gone = connected(agent) ? "" : " (disconnected)";
    if (p == Phase::kPending && now >= start) {
      Fail(i, common::StrCat("agent ", agent, gone,
                             " did not acknowledge the capture before its start time"));
    } else if ((p == Phase::kPending || p == Phase::kArmed || p == Phase::kCapturing) &&
               !workers[i].stopped && now >= stop + deadlines.capture_grace_ns) {
      Fail(i, common::StrCat("agent ", agent, gone, " did not report the end of the window within ",
                             deadlines.capture_grace_ns / 1'000'000, " ms of it"));
    } else if ((p == Phase::kCollected || workers[i].stopped) &&
               now >= stop + deadlines.upload_timeout_ns) {
      Fail(i, common::StrCat("agent ", agent, gone, " did not finish uploading within ",
                             deadlines.upload_timeout_ns / 1'000'000, " ms of the window's end (",
                             workers[i].received_count, " chunks stored)"));
    }
  }
  UpdateState(now);
}

std::set<std::string> LiveCapture::Cancel(const std::string& reason) {
  std::set<std::string> agents;
  for (size_t i = 0; i < workers.size(); ++i) {
    if (Terminal(i)) continue;
    agents.insert(record.workers[i].agent_id);
    SetPhase(i, Phase::kCancelled);
    record.workers[i].error = reason;
  }
  record.state = CaptureState::kCancelled;
  record.error = reason;
  return agents;
}

CaptureRecord LiveCapture::Finish(TimeNs now) {
  CaptureRecord& r = record;
  size_t uploaded = 0, failed = 0;
  // One line per host and reason: an agent lost with its 8 ranks is one failure, said once.
  struct Failure {
    std::string host, error;
    std::vector<int32_t> ranks;
  };
  std::vector<Failure> failures;
  // The capture holds the uploaded workers' events only: what a failed or cancelled worker
  // streamed leaves the store (CaptureScheduler), and chunks counted before a coordinator
  // restart are counted again when the agent sends them again.
  r.events = 0;
  for (size_t i = 0; i < workers.size(); ++i) {
    WorkerRecord& w = r.workers[i];
    if (workers[i].phase == Phase::kUploaded) {
      ++uploaded;
      r.events += w.events;
    } else if (workers[i].phase == Phase::kFailed) {
      ++failed;
      auto same = std::find_if(failures.begin(), failures.end(), [&w](const Failure& f) {
        return f.host == w.host && f.error == w.error;
      });
      if (same != failures.end()) {
        same->ranks.push_back(w.rank);
      } else {
        failures.push_back({w.host, w.error, {w.rank}});
      }
    }
  }
  std::string failure_text;
  for (size_t k = 0; k < failures.size() && k < 5; ++k) {
    const Failure& f = failures[k];
    common::StrAppend(&failure_text, k == 0 ? "" : "; ", f.ranks.size() == 1 ? "rank " : "ranks ",
                      common::FormatRankList(f.ranks), " (", f.host, "): ", f.error);
  }
  if (failures.size() > 5) common::StrAppend(&failure_text, "; ...");
  if (r.state != CaptureState::kCancelled) {
    r.state = uploaded == workers.size() ? CaptureState::kComplete
              : uploaded > 0             ? CaptureState::kPartial
                                         : CaptureState::kFailed;
    if (failed > 0)
      r.error = common::StrCat(failed, " of ", workers.size(), " workers failed: ", failure_text);
  }
  r.updated_ns = now;
  ++r.generation;
  spdlog::info("capture {} {}: {} of {} workers uploaded, {} events{}{}", r.id,
               storage::CaptureStateName(r.state), uploaded, workers.size(), r.events,
               r.error.empty() ? "" : "; ", r.error);
  return r;
}

bool LiveCapture::FreezeClock(size_t i, const ClockAligner& aligner) {
  WorkerRecord& w = record.workers[i];
  absl::StatusOr<ClockFit> fit = aligner.Fit(w.agent_id);
  if (!fit.ok()) return false;
  w.clock = ModelOverWindow(*fit, record.window_start_ns, record.window_duration_ns);
  return true;
}

void LiveCapture::CompleteIfAligned(size_t i, bool deadline_passed, const ClockAligner& aligner) {
  if (!workers[i].chunks_complete || Terminal(i)) return;
  WorkerRecord& w = record.workers[i];
  if (w.clock.source == common::ClockSource::kNone && !FreezeClock(i, aligner) && !deadline_passed)
    return;
  if (w.clock.source == common::ClockSource::kNone) {
    w.error = common::StrCat("agent ", w.agent_id,
                             " never synchronised its clock; events are on its own clock");
  }
  SetPhase(i, Phase::kUploaded);
}

}  // namespace podscope::coordinator
