// A simulated data-parallel training job: N ranks x S steps with a dataloader, forward and
// backward kernels, bucketed gradient AllReduce overlapping backward, and an optimizer.
// Collectives are causal: a collective's transfer starts only when the last rank arrives, so
// waiting emerges from the model. Per-rank slowdowns make stragglers; per-host clock offsets
// and drift put each rank's events in its own clock. Deterministic for a seed.
//
// Used by the agent's simulated ranks, the CLI's `simulate`, tests and benchmarks.
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/capture.h"

namespace podscope::sim {

using common::TimeNs;

// From a kernel's launch on the host to its earliest start on the device, in both models.
inline constexpr TimeNs kLaunchLatencyNs = 2'000;

enum class SlowdownKind : uint8_t { kCompute, kInput, kLaunch };
std::string_view SlowdownKindName(SlowdownKind kind);

// "RANK:FACTOR[:compute|input|launch]", e.g. "5:1.05" (5% slower compute) or "3:4:input".
// Active for steps that start in [from_ns, until_ns) of true time (always, by default).
struct Slowdown {
  int32_t rank = 0;
  double factor = 1.0;
  SlowdownKind kind = SlowdownKind::kCompute;
  TimeNs from_ns = INT64_MIN;
  TimeNs until_ns = INT64_MAX;
  bool ActiveAt(TimeNs t) const { return t >= from_ns && t < until_ns; }
};
absl::StatusOr<Slowdown> ParseSlowdown(std::string_view spec);

// The factors of `rank` for a step starting at `step_start` (true time): 1 unless a slowdown
// of that rank is active then.
void ApplySlowdowns(const std::vector<Slowdown>& slowdowns, int32_t rank, TimeNs step_start,
                    double* compute, double* input, double* launch);

struct WorkloadOptions {
  int32_t ranks = 8;
  int32_t steps = 10;
  uint64_t seed = 1;
  int32_t ranks_per_host = 8;
  std::string job = "sim";
  // Model and network.
  int64_t params = 1'000'000'000;
  int32_t bytes_per_param = 2;
  int32_t buckets = 8;
  double link_gbytes_per_s = 100;  // per-rank bus bandwidth, GB/s
  TimeNs collective_latency_ns = 30'000;
  // Per step work on every rank.
  int32_t forward_kernels = 60, backward_kernels = 120, optimizer_kernels = 20;
  TimeNs forward_ns = 30'000'000, backward_ns = 60'000'000, optimizer_ns = 4'000'000;
  TimeNs dataloader_ns = 3'000'000;
  TimeNs launch_ns = 4'000;
  double jitter = 0.02;  // relative standard deviation of kernel and dataloader times
  std::vector<Slowdown> slowdowns;
  // Clocks: each host's offset is uniform in +-clock_offset_ms, its drift in +-drift_ppm.
  double clock_offset_ms = 0;
  double drift_ppm = 0;
  TimeNs epoch_ns = 1'700'000'000'000'000'000;
  // Numbering: step s of this run is first_step + s (collective sequences follow), and launch
  // correlation ids start at first_correlation, so runs simulated back to back continue one
  // another (a real process's correlation ids never repeat; a trace whose ids did would tie
  // kernels to other steps' launches).
  int64_t first_step = 0;
  int64_t first_correlation = 1;
  // Only ranks in [first_written_rank, last_written_rank] get events; the others are timed alone
  // (their arrivals still hold collectives), and their workers hold their description only. An
  // agent serving four ranks of a 64-rank job holds its own ranks' events, not the job's.
  int32_t first_written_rank = 0;
  int32_t last_written_rank = INT32_MAX;
};

// What really happened in one collective (true time).
struct CollectiveTruth {
  int64_t step = 0;
  int32_t bucket = 0;
  std::vector<TimeNs> arrival;  // per rank
  std::vector<TimeNs> wait;     // per rank: last arrival - own arrival
  TimeNs transfer_ns = 0;       // the same on every rank
};

struct Workload {
  common::Capture capture;  // one worker per rank, events in that rank's own clock
  // The exact local -> true mapping of each rank (what a perfect clock sync would fit).
  std::vector<common::ClockModel> true_clocks;
  std::vector<CollectiveTruth> truth;
};

// Named shapes of a step, applied over `options` (the rest is left as it is):
// - "default": a 97 ms step of 200 kernels, about 4.7 k events per rank per second;
// - "light": a tenth of the kernels and two buckets, for fast tests and scale runs;
// - "dense": a real job's density (a probed H200 rank ran 4.4 ms steps at about 228 k events
//   per second): a 4.4 ms step of 500 kernels, each with its launch call, and a 25 M parameter
//   gradient in 8 buckets, over 200 k events per rank per second.
// Unknown names are an error naming the choices.
absl::Status ApplyPreset(std::string_view name, WorkloadOptions* options);

absl::Status ValidateOptions(const WorkloadOptions& options);
// Options must be valid. Pure; any thread.
Workload SimulateJob(const WorkloadOptions& options);

}  // namespace podscope::sim
