// One capture in progress on the coordinator: its record, and the phase machine of each of its
// workers (pending -> armed -> capturing -> collected -> uploaded, or failed, or cancelled), with
// the deadlines that fail a worker whose agent goes quiet. What moves a worker on: its agent's
// status reports, its chunks, the clock, and cancelling. The capture scheduler owns these and
// calls them under its lock; this class has none of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/clock/clock_aligner.h"
#include "podscope/v1/agent.pb.h"
#include "storage/trace_store.h"

namespace podscope::coordinator {

using common::TimeNs;

struct CaptureDeadlines {
  int64_t capture_grace_ns = 10'000'000'000;    // after the window: the agent must say it ended
  int64_t upload_timeout_ns = 120'000'000'000;  // after the window: every chunk must be in
};

class LiveCapture {
 public:
  enum class Phase { kPending, kArmed, kCapturing, kCollected, kUploaded, kFailed, kCancelled };
  static std::string_view PhaseName(Phase p);
  static std::optional<Phase> PhaseFromName(std::string_view name);

  struct Worker {
    Phase phase = Phase::kPending;
    std::vector<bool> received;  // by chunk sequence
    uint64_t received_count = 0;
    std::optional<uint64_t> expected;  // known once the last chunk arrived
    uint64_t received_bytes = 0;
    uint64_t received_events = 0;
    // Every chunk is stored; the worker is uploaded once its clock model is known too.
    bool chunks_complete = false;
    // The agent said the window is over (it may still be draining): the upload deadline applies.
    bool stopped = false;
  };

  storage::CaptureRecord record;
  std::vector<Worker> workers;  // parallel to record.workers
  std::map<int32_t, size_t> by_rank;
  std::map<std::string, std::vector<int32_t>> ranks_by_agent;
  uint64_t max_events_per_worker = 0, max_upload_bytes = 0;
  bool dirty = false;  // changed since last written to the store
  // After a coordinator restart, agents get a grace period to come back before any deadline
  // counts against them: the outage was ours, not theirs.
  TimeNs deadlines_from_ns = 0;
  std::map<std::string, TimeNs> sent_start;  // agent id -> the start (its clock) last sent
  uint32_t sync_exchanges = 0;
  int64_t sync_spread_ns = 0;

  bool Terminal(size_t i) const;
  bool AllTerminal() const;
  void SetPhase(size_t i, Phase phase);
  // A worker not yet terminal fails with `error`.
  void Fail(size_t i, std::string error);
  // The capture is as far along as its slowest live worker, and no further than `now` says.
  void UpdateState(TimeNs now);

  // One status report of agent `agent_id` about its workers (another agent's are ignored).
  void ApplyStatus(const std::string& agent_id, const v1::CaptureStatus& status, TimeNs now,
                   const ClockAligner& aligner);
  // Chunk `sequence` of worker `i` is stored (`last`: it is the worker's last). True when the
  // worker's chunks just became complete; ResourceExhausted when it is over its byte limit (the
  // worker has failed).
  absl::StatusOr<bool> ChunkStored(size_t i, uint64_t sequence, bool last, uint64_t events,
                                   uint64_t bytes, const ClockAligner& aligner);
  // Fails the workers whose agents missed a deadline at `now`; `connected(agent)` says whether
  // an agent is connected (for the error's words).
  void CheckDeadlines(TimeNs now, const CaptureDeadlines& deadlines,
                      const std::function<bool(const std::string&)>& connected,
                      const ClockAligner& aligner);
  // Cancels every worker still under way; the agents to tell.
  std::set<std::string> Cancel(const std::string& reason);
  // The final record of a capture whose workers are all terminal: complete, partial or failed
  // (or cancelled), with the failures named.
  storage::CaptureRecord Finish(TimeNs now);

 private:
  // Sets worker i's clock model from its agent's current fit, bounded over the window; false
  // when the agent has no usable samples yet (e.g. just reconnected after a restart).
  bool FreezeClock(size_t i, const ClockAligner& aligner);
  // A worker whose chunks are all stored becomes uploaded once it has a clock model, or at the
  // upload deadline without one (then its events stay on the agent's clock).
  void CompleteIfAligned(size_t i, bool deadline_passed, const ClockAligner& aligner);
};

}  // namespace podscope::coordinator
