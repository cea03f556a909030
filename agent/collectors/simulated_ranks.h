// Simulated ranks: a collector that serves some ranks of a simulated data-parallel job
// (sim/), so the whole capture path runs without GPUs.
//
// Every agent of a job derives the job's timeline from the same seed on true (host) time: the
// job runs forever in back-to-back segments of a few seconds, segment k starting at k * length
// since the Unix epoch, each simulated whole (all world ranks, so collectives couple ranks that
// live on different agents). A capture window is served at any moment by simulating the
// segments it overlaps. Events are then moved into the agent's (possibly skewed) clock.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_clock.h"
#include "agent/collector.h"
#include "sim/summary_model.h"
#include "sim/workload_model.h"

namespace podscope::agent {

// --simulate ranks=0-7,world=32,job=J,seed=S,straggler=RANK:FACTOR[:kind],straggler-at=T0[-T1],
//            hang=RANK@T,clock-offset-ms=X,drift-ppm=Y,profile=default|light|dense,sim-world=N
struct SimulationSpec {
  int32_t first_rank = 0, last_rank = 7;
  int32_t world = 8;
  std::string job = "sim";
  uint64_t seed = 1;
  std::vector<sim::Slowdown> stragglers;
  // straggler-at: every straggler is slow from this true time (Unix) until the next only.
  TimeNs straggler_from_ns = INT64_MIN;
  TimeNs straggler_until_ns = INT64_MAX;
  sim::Hang hang;              // hang=RANK@T: that rank enters no collective from T on
  double clock_offset_ms = 0;  // of this agent's clock against the host's
  double drift_ppm = 0;
  std::string profile = "default";  // sim::ApplyPreset: "light" (scale tests), "dense" (real)
  // Simulate a job of this many ranks and serve rank r with rank r mod sim_world's timeline
  // (0: the whole world). For scale tests, where simulating thousands of ranks in every agent
  // process would cost more than the agents.
  int32_t sim_world = 0;
};
absl::StatusOr<SimulationSpec> ParseSimulationSpec(std::string_view text);

class SimulatedRanksCollector : public Collector {
 public:
  // `clock` must outlive the collector.
  SimulatedRanksCollector(SimulationSpec spec, std::string host, const AgentClock& clock);
  ~SimulatedRanksCollector() override { StopWatch(); }

  std::string_view name() const override { return "sim"; }
  std::vector<WorkerIdentity> Workers() const override;
  absl::Status Arm(const CaptureWindow& window) override;
  absl::Status Start(std::string_view capture_id) override;
  absl::Status Stop(std::string_view capture_id) override;
  absl::StatusOr<std::vector<common::WorkerTrace>> TakeRecorded(std::string_view capture_id,
                                                                int32_t rank) override;
  absl::StatusOr<CollectedWorker> Drain(std::string_view capture_id, int32_t rank) override;
  void Forget(std::string_view capture_id) override;
  // Watch data from the same timeline, step by step as true time passes each step's end: the
  // summary model (sim/summary_model.h) over the same segments, seeds and slowdowns as the
  // captures'. Once the job hangs, each served rank's progress every second instead.
  void StartWatch(WatchSink* sink) override;
  void StopWatch() override;

  // The events of `rank` wholly inside [begin, end] on true (host) time, moved into the agent
  // clock: one piece per segment the window overlaps. What Drain serves.
  std::vector<common::WorkerTrace> EventsBetween(int32_t rank, TimeNs begin, TimeNs end) const {
    return EventsEndedBetween(rank, begin, begin - 1, end);
  }
  // Of those, the ones that end after `after`: what TakeRecorded serves, as true time passes.
  // The segments read go to `segments` when given: what the caller holds until it reads on.
  std::vector<common::WorkerTrace> EventsEndedBetween(
      int32_t rank, TimeNs begin, TimeNs after, TimeNs end,
      std::vector<std::shared_ptr<const sim::Workload>>* segments = nullptr) const;

  // Segment length of the simulated timeline; segment k starts at k * segment_ns() (Unix time)
  // with step k * steps_per_segment(). kSegmentNs for every profile but dense, whose segments are
  // a quarter of it: a segment is simulated whole and held while read, and a second of eight
  // dense ranks is already 1.8 M events.
  static constexpr TimeNs kSegmentNs = 4'000'000'000;
  static constexpr TimeNs kDenseSegmentNs = 1'000'000'000;
  TimeNs segment_ns() const { return segment_ns_; }
  int32_t steps_per_segment() const { return steps_per_segment_; }

 private:
  struct Recording {
    CaptureWindow window;
    TimeNs actual_start = 0, actual_stop = 0;
    // Per rank, what TakeRecorded handed over: the events that ended by `until` (true time).
    struct Taken {
      TimeNs until = 0;
      uint64_t events = 0;
      // The segment last read for the rank, held so the next read need not simulate it again
      // (the segment index holds none); it goes with the recording. A drain holds what it reads
      // only while it reads: after a window the reads can be seconds behind, and holding those
      // segments for every rank's drain took an agent of eight dense ranks from 414 MB to 1.1 GB.
      std::vector<std::shared_ptr<const sim::Workload>> segments;
    };
    std::map<int32_t, Taken> taken;
  };
  // A copy of the recording of `capture_id`, which must serve `rank`.
  absl::StatusOr<Recording> Find(std::string_view capture_id, int32_t rank);
  // The whole job over segment k (true time), shared by every collector of this process.
  std::shared_ptr<const sim::Workload> Segment(int64_t k) const;
  sim::WorkloadOptions SegmentOptions(int64_t k) const;
  void WatchLoop(WatchSink* sink);
  // Waits until true time `host_ns` unless StopWatch; false when stopping.
  bool WaitUntilHost(TimeNs host_ns);
  // A summary of simulated rank `timeline` as served rank `rank`, on the agent's clock.
  common::StepSummary AsServed(common::StepSummary s, int32_t rank) const;

  const SimulationSpec spec_;
  const std::string host_;
  const AgentClock& clock_;
  sim::WorkloadOptions base_;
  TimeNs segment_ns_ = kSegmentNs;
  int32_t steps_per_segment_ = 0;
  absl::Mutex mu_;
  std::map<std::string, Recording, std::less<>> recordings_ ABSL_GUARDED_BY(mu_);
  absl::Mutex watch_mu_;
  bool watch_stopping_ ABSL_GUARDED_BY(watch_mu_) = false;
  std::thread watch_thread_;
};

}  // namespace podscope::agent
