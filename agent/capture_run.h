// One capture on one agent: arm the collectors, start them at the coordinator's
// start time (already converted into the agent clock), stop them after the duration, drain and
// encode the events into a bounded in-memory spool, and upload it, retrying across broken
// streams and coordinator restarts until every chunk is acknowledged. With a stream interval,
// while the window runs, what the collectors have recorded so far is encoded and offered to the
// coordinator the same way: the agent holds one interval's events parsed and the rest as
// serialized chunks (kept until the end, so a coordinator that restarts can be sent them again).
// Status goes up after every phase change.
// Runs on its own thread; Cancel() stops it at any phase.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_clock.h"
#include "agent/collector.h"
#include "podscope/v1/agent.pb.h"

namespace podscope::agent {

class StartTimer;

struct CaptureRunOptions {
  // Fires the collectors' starts; shared by every run of the agent (of the process). Null: the
  // run has a timer of its own.
  StartTimer* start_timer = nullptr;
  size_t chunk_events = 65536;              // events per uploaded chunk
  uint64_t max_spool_bytes = 512ull << 20;  // serialized chunks held for upload, all workers
  int64_t upload_give_up_ns = 600'000'000'000;
  // How often, while the window runs, what the collectors recorded goes up (0: only after it),
  // so that the agent holds one interval's events parsed rather than a window's.
  int64_t stream_interval_ns = 1'000'000'000;
  int64_t retry_initial_ns = 100'000'000;
  int64_t retry_max_ns = 5'000'000'000;
};

struct CaptureRunHooks {
  std::function<void(const v1::CaptureStatus&)> report;
  // A clock burst of `exchanges`, none begun or still under way at `until` (agent clock; 0:
  // no limit), so a slow network never delays the start it is sharpening.
  std::function<void(std::string_view reason, int exchanges, TimeNs until)> sync_clock;
  // One attempt at uploading `chunks` (each a serialized v1::UploadRequest) in one Upload stream,
  // given up at `deadline` (agent clock; 0: the hook's own). An OK answer means every chunk is
  // stored.
  std::function<absl::StatusOr<v1::UploadResponse>(const std::vector<const std::string*>& chunks,
                                                   TimeNs deadline)>
      upload;
};

class CaptureRun {
 public:
  // `collectors` maps every rank this agent serves to its collector; requested ranks not in it
  // fail at once. The clock and collectors must outlive the run.
  CaptureRun(v1::CaptureRequest request, std::map<int32_t, Collector*> collectors,
             std::string agent_id, const AgentClock& clock, CaptureRunHooks hooks,
             CaptureRunOptions options);
  ~CaptureRun();  // cancels and joins

  void Begin();
  // A sharper start time for the same instant (the coordinator refitted our clock); false
  // once the window has started.
  bool MoveStart(TimeNs start_agent_ns);
  void Cancel(std::string reason);
  v1::CaptureStatus Status() const;
  bool finished() const;
  const std::string& id() const { return request_.capture_id(); }

 private:
  void Run();
  static void ReturnFreedMemory();
  // Arms each collector for its requested ranks; a collector that refuses fails its ranks.
  void ArmCollectors(TimeNs first_start);
  // A clock-sync burst at a random point early in the lead; false when cancelled first.
  bool SyncBeforeStart(std::mt19937_64& rng, TimeNs first_start, int64_t spread, int exchanges);
  // Stops the collectors at the window's end and marks the capturing workers stopped.
  void StopCollectors();
  // After the upload: the spool freed, cancelled workers marked, the last status sent.
  void FinishUploaded();
  // Waits for the start (following moves), then starts the collectors; false when cancelled
  // before they started.
  // The start timer starts the collectors; the run's thread sleeps until `settle_ns` past it.
  bool AwaitStart(TimeNs* start, int64_t settle_ns);
  // Starts every collector if the start is still `start` and nothing started or cancelled them.
  void StartCollectors(TimeNs start);
  // (Re)schedules StartCollectors for start_ns_ on the start timer.
  void ScheduleStartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(timer_mu_);
  void UnscheduleStart();
  // Sleeps until `deadline` on the agent clock; false when cancelled first.
  bool WaitUntil(TimeNs deadline);
  int64_t WokeLateNs() const;
  void SetFailed(int32_t rank, std::string error);
  void SetPhase(int32_t rank, v1::WorkerPhase phase);
  void Report();
  // While the window runs: what the collectors recorded so far, spooled and offered to the
  // coordinator once, given up at `deadline` (the window's end).
  void StreamRecorded(TimeNs deadline);
  void DrainAndSpool();
  // Cuts `pieces` of `rank` into chunks and spools them, numbered after what the rank spooled
  // before; `final` marks the last chunk (an empty one if nothing is left). False when the rank
  // failed (over the upload or spool bound).
  bool Spool(int32_t rank, std::vector<common::WorkerTrace> pieces, bool final);
  void UploadSpool();
  bool Cancelled();
  void FinishCancelled();

  const v1::CaptureRequest request_;
  const std::map<int32_t, Collector*> collectors_;
  const std::string agent_id_;
  const AgentClock& clock_;
  const CaptureRunHooks hooks_;
  const CaptureRunOptions options_;

  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) =
      false;  // StartCollectors began: the start can no longer move
  bool collectors_started_ ABSL_GUARDED_BY(mu_) = false;  // and returned
  // The start's entry in the start timer (0: none). timer_mu_ is never taken under mu_:
  // cancelling an entry waits for a StartCollectors under way, which takes mu_.
  absl::Mutex timer_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  uint64_t timer_id_ ABSL_GUARDED_BY(timer_mu_) = 0;
  std::unique_ptr<StartTimer> own_timer_;  // when the options bring none
  StartTimer* timer_ = nullptr;
  int64_t woke_late_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<Collector*, std::vector<int32_t>> by_collector_;  // the requested ranks of each
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<TimeNs> start_ns_;
  std::string cancel_reason_ ABSL_GUARDED_BY(mu_);
  std::map<int32_t, v1::WorkerCaptureStatus> workers_ ABSL_GUARDED_BY(mu_);
  // Chunks as they travel (serialized: a few bytes an event, where a parsed message holds 8 a
  // column), with their worker's rank. Only touched by the run's thread.
  struct Spooled {
    int32_t rank = 0;
    std::string bytes;
    bool stored = false;  // the coordinator said so during the window
  };
  std::vector<Spooled> spool_;
  uint64_t spool_bytes_ = 0;
  // Per rank, what went into the spool so far (also run's thread only).
  struct Sent {
    uint64_t chunks = 0, events = 0, bytes = 0;
    common::WorkerInfo info;  // the last piece's, for a final empty chunk
  };
  std::map<int32_t, Sent> sent_;
  std::thread thread_;
};

}  // namespace podscope::agent
