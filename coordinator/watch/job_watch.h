// One watched job (docs/watch.md): its ranks' step summaries matched across ranks by communicator
// and sequence, the caused delay of every collective (the offline
// stragglers report's), and a sliding window of settled steps for the detectors. Every map is
// bounded; what does not fit is dropped and counted.
//
// Not thread-safe: the watch service holds one per job under its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/watch_summary.h"

namespace podscope::coordinator::watch {

using common::TimeNs;

// What every job's watch keeps, in bytes (an estimate of its maps and vectors), against a bound
// they share: the engine's. Not thread-safe (the engine's lock).
struct WatchMemory {
  size_t used = 0;
  size_t limit = SIZE_MAX;
  uint64_t refused = 0;  // records dropped at a job's bound or this one
};

// Settled steps a rank may miss before it counts as absent (the window is then not full).
inline constexpr int64_t kMissingAfterSteps = 3;
// How long, on the coordinator's clock, an absent rank stays absent before it counts as not
// reporting (the alert): past one probe flush and the settle time, so that the steps a rank loses
// when its job ends or its agent reconnects raise nothing.
inline constexpr TimeNs kNotReportingAfterNs = 15'000'000'000;
// An absent rank is retired after this long: the job goes on without it (an elastic job that
// shrank), its windows are judged again, and the not-reporting alert resolves.
inline constexpr TimeNs kRetireAbsentAfterNs = 600'000'000'000;

struct WatchLimits {
  int32_t window_steps = 20;
  int32_t baseline_steps = 100;
  // A step settles when every rank has reported a later one; or when the coordinator's clock is
  // settle_after_ns past its end (a rank that stopped reporting does not hold the window back;
  // the time covers a probe's flush, its agent's step hold and batch, and the stream: each
  // process flushes on its own phase, so at 30 steps/s one rank's summaries may arrive dozens of
  // steps after another's); or when it is settle_lag_steps behind the newest (the bound on
  // steps waiting).
  TimeNs settle_after_ns = 5'000'000'000;
  int32_t settle_lag_steps = 256;
  size_t max_ranks = 65'536;
  size_t max_collectives_per_summary = 4'096;
  size_t max_pending_collectives = 65'536;
  size_t max_communicators = 4'096;
  // What one job keeps (pending collectives, unsettled and windowed steps, ranks, progress):
  // past it, new records of the job are dropped and counted, and the rest goes on.
  size_t max_bytes = size_t{64} << 20;
};

// One rank over the window: the straggler terms of analysis/stragglers.h and what the sinks show.
struct RankWindow {
  int32_t rank = 0;
  TimeNs caused_delay_ns = 0;         // summed over the collectives it arrived last at
  TimeNs largest_step_caused_ns = 0;  // the most it caused in any one step of the window
  int64_t last_arrivals = 0;
  int64_t collectives = 0;  // matched collectives it took part in
  TimeNs step_time_ns = 0;  // summed over its steps in the window
  int64_t steps = 0;
  TimeNs exposed_comm_ns = 0;       // summed exposed communication tails
  std::vector<int64_t> late_steps;  // steps in which it caused delay
};

struct WindowStats {
  int64_t first_step = 0;
  int64_t last_step = 0;  // the step that just settled
  // The window holds window_steps settled steps (at a job's start, or after a restart, it
  // fills up first) and every rank that reported is still reporting: the detectors wait for a
  // full one, so that a lost agent neither fires nor resolves what its ranks took part in.
  bool full = false;
  // Ranks that reported steps before but none of the last kMissingAfterSteps settled ones, nor
  // any later (absent: the window is not full), for kNotReportingAfterNs or more: their process
  // or agent stopped. Retired after kRetireAbsentAfterNs, or when the job restarts.
  std::vector<int32_t> absent_ranks;
  std::vector<int32_t> missing_ranks;
  int64_t missing_since_step = -1;          // the newest step any of them reported
  std::vector<std::string> missing_agents;  // the agents that served them (the engine fills it)
  std::vector<RankWindow> ranks;            // by rank
  std::vector<std::string> hosts;           // parallel to ranks ("" when unknown)
  TimeNs total_caused_delay_ns = 0;
  TimeNs window_step_time_ns = 0;             // median over ranks of their summed step time
  std::vector<TimeNs> step_time_ns;           // per settled step in the window: median over ranks
  std::vector<TimeNs> baseline_step_time_ns;  // the same for the steps before the window
  double allreduce_bytes = 0;                 // AllReduce bytes in the window
  double allreduce_busbw_gbytes_per_s = 0;    // bytes-weighted bus bandwidth, GB/s
};

// Where the ranks of one communicator stand (for hangs).
struct CommunicatorProgress {
  uint64_t communicator = 0;
  int32_t nranks = 0;
  std::vector<common::RankProgress> ranks;  // by rank
};

struct WatchCounters {
  uint64_t summaries = 0;
  uint64_t rejected_summaries = 0;     // malformed
  uint64_t late_summaries = 0;         // for a step that already left the window
  uint64_t unmatched_collectives = 0;  // evicted before every rank arrived
  uint64_t dropped_ranks = 0;          // past max_ranks
  uint64_t dropped_communicators = 0;
  uint64_t restarts = 0;     // step numbers went back: a new run of the job
  uint64_t over_memory = 0;  // records dropped at the job's or the engine's memory bound
};

class JobWatch {
 public:
  // `shared` (optional) is the bound every job's bytes count against; it outlives the job.
  explicit JobWatch(WatchLimits limits = {}, WatchMemory* shared = nullptr);
  ~JobWatch();
  JobWatch(const JobWatch&) = delete;
  JobWatch& operator=(const JobWatch&) = delete;

  void SetHost(int32_t rank, std::string host);
  // Times on the coordinator's clock. A malformed summary is refused with the reason.
  absl::Status Add(const common::StepSummary& summary);
  void Add(const common::RankProgress& progress);

  // Settles what can settle at `now` (coordinator clock) and returns the window after each newly
  // settled step, oldest first. Without a time, only the ranks and the lag settle steps.
  std::vector<WindowStats> Settle(TimeNs now = INT64_MIN);

  std::vector<CommunicatorProgress> Progress() const;
  const WatchCounters& counters() const { return counters_; }
  int64_t newest_step() const { return newest_step_; }
  size_t bytes() const { return bytes_; }

 private:
  struct Cell {
    bool present = false;
    TimeNs step_ns = 0;
    TimeNs caused_ns = 0;
    TimeNs exposed_ns = 0;
    int32_t last_arrivals = 0;
    int32_t collectives = 0;
  };
  struct StepRecord {
    std::vector<Cell> cells;           // by rank index
    TimeNs median_step_ns = 0;         // over ranks, set when the step settles
    TimeNs newest_end_ns = INT64_MIN;  // the latest end any rank reported for it
    double allreduce_bytes = 0;
    double allreduce_busbw_bytes = 0;  // sum of busbw x bytes
  };
  struct Arrival {
    uint32_t rank_index = 0;
    int64_t step = 0;
    TimeNs start = 0;
    TimeNs end = 0;
  };
  struct PendingCollective {
    common::CollectiveOp op = common::CollectiveOp::kUnknown;
    int32_t nranks = 0;
    int64_t bytes = 0;
    int64_t first_step = 0;
    std::vector<Arrival> arrivals;
  };
  struct CollectiveKey {
    uint64_t communicator;
    int64_t sequence;
    bool operator==(const CollectiveKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const CollectiveKey& k) {
      return H::combine(std::move(h), k.communicator, k.sequence);
    }
  };

  // -1 when the rank does not fit.
  int64_t RankIndex(int32_t rank);
  StepRecord* Record(int64_t step);
  Cell& CellIn(StepRecord& record, uint32_t rank_index);
  Cell* CellOf(int64_t step, uint32_t rank_index);
  void AddArrival(const common::CollectiveArrival& a, uint32_t rank_index, int64_t step);
  void Resolve(const PendingCollective& c);
  void UpdateProgress(const common::RankProgress& p);
  void EvictPendingBefore(int64_t step);
  WindowStats Window(TimeNs now);
  void Reset();
  // Whether `more` bytes fit the job's bound and the shared one; counts a refusal.
  bool Fits(size_t more);
  void Charge(size_t bytes);
  void Release(size_t bytes);
  static size_t RecordBytes(const StepRecord& r);
  static size_t PendingBytes(const PendingCollective& c);

  WatchLimits limits_;
  WatchMemory* const shared_;
  size_t bytes_ = 0;
  WatchCounters counters_;
  std::vector<int32_t> ranks_;        // by index
  std::vector<std::string> hosts_;    // by index
  std::vector<int64_t> rank_newest_;  // newest step each rank reported
  // When each rank was first seen absent (coordinator clock; INT64_MIN: not absent), and whether
  // it was retired (not expected any more).
  std::vector<TimeNs> rank_absent_since_;
  std::vector<bool> rank_retired_;
  absl::flat_hash_map<int32_t, uint32_t> rank_index_;
  std::map<int64_t, StepRecord> unsettled_;            // by step
  std::deque<std::pair<int64_t, StepRecord>> window_;  // settled, oldest first
  std::deque<TimeNs> baseline_;  // job step time of steps that left the window
  absl::flat_hash_map<CollectiveKey, PendingCollective> pending_;
  struct CommunicatorState {
    int32_t nranks = 0;
    absl::flat_hash_map<int32_t, common::RankProgress> ranks;
  };
  std::map<uint64_t, CommunicatorState> progress_;
  int64_t newest_step_ = -1;
  int64_t settled_through_ = -1;  // every step up to this one has settled (or never existed)
};

}  // namespace podscope::coordinator::watch
