#include "sim/summary_model.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace podscope::sim {

struct SummaryModel::RankState {
  std::mt19937_64 rng;
  double compute_factor = 1, input_factor = 1, launch_factor = 1;
  TimeNs host = 0, compute = 0, comm = 0, step_start = 0;
  std::vector<TimeNs> bucket_ready, bucket_launch;
};

namespace {

// The summed time of `k` kernels of mean `mean_ns` each, jittered independently.
TimeNs SumOf(std::mt19937_64& rng, int32_t k, double mean_ns, double jitter) {
  std::normal_distribution<double> noise(0.0, 1.0);
  const double sum =
      k * mean_ns + jitter * mean_ns * std::sqrt(static_cast<double>(k)) * noise(rng);
  return std::max<TimeNs>(static_cast<TimeNs>(k) * 1'000, static_cast<TimeNs>(sum));
}

}  // namespace

SummaryModel::SummaryModel(const WorkloadOptions& o, const Hang& hang)
    : o_(o),
      hang_(hang),
      state_(o.ranks),
      progress_(o.ranks),
      communicator_(common::CommunicatorHash("pg:0")) {
  const int32_t n = o_.ranks;
  for (int32_t r = 0; r < n; ++r) {
    RankState& s = state_[r];
    s.rng.seed(o_.seed * 1'000'003ull + static_cast<uint64_t>(r) * 7919ull + 17);
    s.host =
        o_.epoch_ns + static_cast<TimeNs>(std::uniform_int_distribution<int>(0, 20'000)(s.rng));
    s.compute = s.comm = s.host;
    progress_[r].rank = r;
    progress_[r].communicator = communicator_;
    progress_[r].nranks = n;
    // Every collective of the steps before this model's first was completed before it begins
    // (the agent runs one model per segment of time): a hang in its first collective then
    // reports where each rank stands, not "nothing completed".
    progress_[r].entered_sequence = progress_[r].completed_sequence =
        o_.first_step * o_.buckets - 1;
    progress_[r].entered_ns = progress_[r].completed_ns = o_.epoch_ns;
  }
  bucket_bytes_ = o_.params * o_.bytes_per_param / o_.buckets;
  const double bus_factor = n > 1 ? 2.0 * (n - 1) / n : 0.0;
  transfer_ns_ = o_.collective_latency_ns + static_cast<TimeNs>(bucket_bytes_ * bus_factor /
                                                                (o_.link_gbytes_per_s * 1e9) * 1e9);
  now_ = o_.epoch_ns;
}

SummaryModel::~SummaryModel() = default;

bool SummaryModel::Next(std::vector<common::StepSummary>* out) {
  if (hung_ || step_ >= o_.steps) return false;
  const int32_t n = o_.ranks;
  const int64_t number = o_.first_step + step_;
  const int32_t per_bucket = o_.backward_kernels / o_.buckets;
  // A run of `k` kernels launched back to back from the host: the host and compute stream after.
  auto launch_run = [&](RankState& s, int32_t k, double mean_ns, TimeNs launch) {
    const TimeNs first_launch = s.host + 500 + launch;
    s.compute = std::max(s.compute, first_launch + kLaunchLatencyNs) +
                SumOf(s.rng, k, mean_ns * s.compute_factor, o_.jitter);
    s.host += static_cast<TimeNs>(k) * (launch + 1'000);
    // The last kernel cannot start before the host launched it.
    s.compute = std::max(
        s.compute, s.host + kLaunchLatencyNs + static_cast<TimeNs>(mean_ns * s.compute_factor));
  };
  for (int32_t r = 0; r < n; ++r) {
    RankState& s = state_[r];
    s.step_start = s.host;
    ApplySlowdowns(o_.slowdowns, r, s.step_start, &s.compute_factor, &s.input_factor,
                   &s.launch_factor);
    const TimeNs launch = static_cast<TimeNs>(o_.launch_ns * s.launch_factor);
    s.host += SumOf(s.rng, 1, static_cast<double>(o_.dataloader_ns) * s.input_factor, o_.jitter);
    s.compute =
        std::max(s.compute, s.host + launch + kLaunchLatencyNs) + 500'000;  // the batch's copy
    s.host += launch + 1'000;
    launch_run(s, o_.forward_kernels, static_cast<double>(o_.forward_ns) / o_.forward_kernels,
               launch);
    s.bucket_ready.assign(o_.buckets, 0);
    s.bucket_launch.assign(o_.buckets, 0);
    for (int32_t b = 0; b < o_.buckets; ++b) {
      const int32_t count = b + 1 == o_.buckets ? o_.backward_kernels - per_bucket * b : per_bucket;
      launch_run(s, count, static_cast<double>(o_.backward_ns) / o_.backward_kernels, launch);
      s.bucket_ready[b] = s.compute;
      s.bucket_launch[b] = s.host + 1'000;
      s.host += 2'000 + launch;
    }
  }
  std::vector<common::StepSummary> steps(n);
  std::vector<TimeNs> arrival(n);
  TimeNs previous_end = 0;
  for (int32_t b = 0; b < o_.buckets; ++b) {
    const int64_t sequence = number * o_.buckets + b;
    TimeNs last = INT64_MIN;
    for (int32_t r = 0; r < n; ++r) {
      const RankState& s = state_[r];
      const TimeNs launched = s.bucket_launch[b] +
                              static_cast<TimeNs>(o_.launch_ns * s.launch_factor) +
                              kLaunchLatencyNs;
      arrival[r] = std::max({s.bucket_ready[b], s.comm, previous_end, launched});
      last = std::max(last, arrival[r]);
    }
    if (hang_.rank >= 0 && hang_.rank < n && arrival[hang_.rank] >= hang_.at_ns) {
      // The hung rank never enters; everyone else does, and waits for it forever.
      for (int32_t r = 0; r < n; ++r) {
        if (r == hang_.rank) continue;
        common::RankProgress& p = progress_[r];
        p.entered_sequence = sequence;
        p.entered_ns = arrival[r];
        p.entered_op = common::CollectiveOp::kAllReduce;
        p.entered_bytes = bucket_bytes_;
      }
      hung_ = true;
      now_ = std::max(now_, hang_.at_ns);
      return false;
    }
    const TimeNs end = last + transfer_ns_;
    for (int32_t r = 0; r < n; ++r) {
      common::CollectiveArrival a;
      a.communicator = communicator_;
      a.sequence = sequence;
      a.op = common::CollectiveOp::kAllReduce;
      a.nranks = n;
      a.bytes = bucket_bytes_;
      a.enqueue_ns = state_[r].bucket_launch[b];
      a.start_ns = arrival[r];
      a.end_ns = end;
      steps[r].collectives.push_back(a);
      state_[r].comm = end;
      common::RankProgress& p = progress_[r];
      p.entered_sequence = p.completed_sequence = sequence;
      p.entered_ns = arrival[r];
      p.completed_ns = end;
      p.entered_op = common::CollectiveOp::kAllReduce;
      p.entered_bytes = bucket_bytes_;
    }
    previous_end = end;
  }
  for (int32_t r = 0; r < n; ++r) {
    RankState& s = state_[r];
    const TimeNs launch = static_cast<TimeNs>(o_.launch_ns * s.launch_factor);
    s.compute = std::max(s.compute, s.comm);  // the optimizer waits for the reduced gradients
    launch_run(s, o_.optimizer_kernels, static_cast<double>(o_.optimizer_ns) / o_.optimizer_kernels,
               launch);
    const TimeNs sync_end = std::max(s.host, s.compute) + 5'000;
    s.host = sync_end + 10'000;
    common::StepSummary& summary = steps[r];
    summary.rank = r;
    summary.step = number;
    summary.start_ns = s.step_start;
    summary.end_ns = s.host;
    summary.comm_kernel_ns = common::CommunicationKernelTime(summary.collectives);
    now_ = std::max(now_, s.host);
  }
  ++step_;
  out->insert(out->end(), std::make_move_iterator(steps.begin()),
              std::make_move_iterator(steps.end()));
  return true;
}

}  // namespace podscope::sim
