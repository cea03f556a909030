// Live captures (docs/life-of-a-capture.md): picks the target workers, chooses a start time far
// enough ahead for every agent to arm, sends each agent that instant in its own clock, follows
// every worker through armed -> capturing -> collected -> uploaded, stores uploaded chunks, and
// finishes the capture as complete, partial (some workers failed; each names why) or failed. Every
// phase has a deadline, so a lost agent delays a capture by at most that deadline, never forever.
//
// State lives in memory and is flushed to the store at most every flush_interval (and at every
// capture-level transition), so a restarted coordinator picks up captures still uploading.
// Thread-safe; one internal thread runs deadlines and flushes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/time_source.h"
#include "coordinator/agents/agent_registry.h"
#include "coordinator/capture/live_capture.h"
#include "coordinator/clock/clock_aligner.h"
#include "podscope/v1/agent.pb.h"
#include "storage/trace_store.h"

namespace podscope::coordinator {

struct SchedulerOptions {
  // Appended to capture ids: "-SHARD" on a sharded coordinator, so that ids are unique across
  // shards.
  std::string id_suffix;
  // start = now + delay + lead, lead = min_lead + agents x lead_per_agent: every agent must
  // hear of the capture, acknowledge and (when its model is stale) sync its clock before it.
  int64_t min_lead_ns = 250'000'000;
  // What a coordinator's fan-out costs per agent, with room: sending a thousand requests and
  // hearing a thousand acknowledgements took 0.45 ms per agent on a 2-core host shared with
  // the agents themselves (bench/scale.sh).
  int64_t lead_per_agent_ns = 500'000;
  int64_t max_duration_ns = 600'000'000'000;
  int64_t max_delay_ns = 3'600'000'000'000;
  int64_t capture_grace_ns = 10'000'000'000;    // after the window: the agent must say it ended
  int64_t upload_timeout_ns = 120'000'000'000;  // after the window: every chunk must be in
  uint64_t max_events_per_worker = 50'000'000;
  uint64_t max_upload_bytes_per_worker = 2ull << 30;
  uint32_t max_workers_per_capture = 65536;
  size_t max_live_captures = 64;
  int64_t flush_interval_ns = 100'000'000;
  // Clock exchanges this coordinator serves per second without queueing them; the bursts
  // around a capture are sized and spread to fit. An agent skips the burst before the window
  // when its model is within good_enough_bound_ns there, or when the model is fresh (its bound
  // at the window at most twice that at its newest exchange) and not wider than wide_bound_ns.
  double clock_exchanges_per_second = 20'000;
  int64_t good_enough_bound_ns = 50'000;
  int64_t wide_bound_ns = 1'000'000;
  int max_sync_exchanges = 8;
  bool refine_with_collectives = true;
};

struct CaptureSpec {
  std::string job;
  std::vector<int32_t> ranks;  // empty: every rank of the job
  int64_t duration_ns = 0;
  int64_t delay_ns = 0;
  uint64_t max_events_per_worker = 0;  // 0: the scheduler's default
  uint64_t max_upload_bytes = 0;
};

// How far ahead a background capture starts (StartBackgroundCapture).
inline constexpr int64_t kBackgroundCaptureLeadNs = 1'000'000'000;

class CaptureScheduler {
 public:
  CaptureScheduler(storage::TraceStore& store, AgentRegistry& registry, ClockAligner& aligner,
                   SchedulerOptions options, const common::TimeSource& time = common::RealTime());
  ~CaptureScheduler();

  // Picks up captures a previous run left before their end. Call once, before Start().
  absl::Status Recover();
  void Start();
  void Stop();

  // InvalidArgument for a bad spec, NotFound when no connected agent serves it,
  // ResourceExhausted when too many captures are live.
  absl::StatusOr<storage::CaptureRecord> StartCapture(const CaptureSpec& spec);
  // A capture nobody waits on (an alert's evidence, a schedule's run): it starts
  // kBackgroundCaptureLeadNs from now, later than the minimum lead, so that a busy agent still
  // acknowledges it in time (a second costs such a capture nothing). `spec.delay_ns` is
  // ignored. Returns its id; errors as StartCapture's.
  absl::StatusOr<std::string> StartBackgroundCapture(CaptureSpec spec);
  // NotFound for an unknown capture, FailedPrecondition for one already finished.
  absl::Status Cancel(const std::string& capture_id, const std::string& reason);

  // From the agents (gRPC threads).
  void OnCaptureStatus(const std::string& agent_id, const v1::CaptureStatus& status);
  // The agent sent fresh clock samples: captures it has not started yet get a start time
  // converted with the sharper model (its bursts right after a request make it much better).
  void OnClockUpdated(const std::string& agent_id);
  // Validates and stores one uploaded chunk. Idempotent per (capture, rank, sequence).
  absl::Status OnChunk(const v1::UploadRequest& chunk);
  // Every chunk of this worker is stored.
  bool WorkerComplete(const std::string& capture_id, int32_t rank);

  // The scheduler's view of a capture in progress or just finished; nullopt otherwise.
  std::optional<storage::CaptureRecord> LiveRecord(const std::string& capture_id) const;
  size_t LiveCount() const;
  // Whether a capture of `job` is in progress (not yet complete, partial, failed or cancelled).
  bool HasLiveCapture(const std::string& job) const;

 private:
  // (agent id, its capture request), made under the lock, sent outside it.
  using Outgoing = std::vector<std::pair<std::string, v1::CoordinatorMessage>>;

  absl::Status Validate(const CaptureSpec& spec) const;
  v1::CoordinatorMessage RequestFor(const LiveCapture& c, const std::string& agent_id,
                                    TimeNs start_agent_ns, bool sync_before) const;
  // Every target's request, the start in its own clock; a target without a clock model fails.
  Outgoing Requests(LiveCapture& live, const std::vector<CaptureTarget>& targets,
                    const std::vector<absl::StatusOr<ClockFit>>& fits) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends them; an agent that cannot be reached fails its workers, and a capture cancelled
  // meanwhile is cancelled on every agent again (the cancel may have overtaken the requests).
  void Send(const std::string& capture_id, const Outgoing& outgoing);

  void Loop();
  // Turns a capture whose workers are all terminal into its final record (under mu_), which
  // stays answerable from memory (recent_) until it is in the store.
  storage::CaptureRecord FinalRecord(LiveCapture& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Store(const storage::CaptureRecord& record);
  // What a worker that failed or was cancelled streamed before it stopped is incomplete: it
  // leaves the store, so no analysis or export reads it.
  void DropUnfinishedWorkers(storage::CaptureRecord& record);
  // Counts a chunk of a live capture that is now in the store.
  absl::Status RecordStoredChunk(LiveCapture& c, const v1::UploadRequest& chunk, uint64_t events,
                                 uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  storage::TraceStore& store_;
  AgentRegistry& registry_;
  ClockAligner& aligner_;
  const SchedulerOptions options_;
  const common::TimeSource& time_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by what the loop should look at now
  std::map<std::string, std::unique_ptr<LiveCapture>> live_ ABSL_GUARDED_BY(mu_);
  // Finished, bounded (kRecent).
  std::map<std::string, storage::CaptureRecord> recent_ ABSL_GUARDED_BY(mu_);
  // Finished, being refined and stored: shown as uploading.
  std::set<std::string> storing_ ABSL_GUARDED_BY(mu_);
  static constexpr size_t kRecent = 64;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace podscope::coordinator
