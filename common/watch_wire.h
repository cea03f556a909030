// Watch data on the wire (agent.proto's WatchBatch): an agent batches its ranks' step summaries
// and progress; the coordinator decodes and checks them. Times stay on the agent's clock here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock_model.h"
#include "common/watch_summary.h"
#include "podscope/v1/agent.pb.h"

namespace podscope::common {

class WatchBatchBuilder {
 public:
  void Add(std::string_view job, const StepSummary& step);
  void Add(std::string_view job, const RankProgress& progress);
  size_t steps() const { return static_cast<size_t>(batch_.steps_size()); }
  size_t progress() const { return static_cast<size_t>(batch_.progress_size()); }
  bool empty() const { return steps() == 0 && progress() == 0; }
  // The batch so far; the builder starts over.
  v1::WatchBatch Take();

 private:
  uint32_t JobIndex(std::string_view job);
  uint32_t CommunicatorIndex(uint64_t communicator);

  v1::WatchBatch batch_;
  std::map<std::string, uint32_t, std::less<>> jobs_;
  std::map<uint64_t, uint32_t> communicators_;
};

struct WatchWireLimits {
  size_t max_steps = 65'536;
  size_t max_progress = 65'536;
  size_t max_collectives_per_step = 4'096;
  size_t max_jobs = 1'024;
  size_t max_communicators = 65'536;
  size_t max_job_bytes = 128;
};

struct DecodedWatch {
  std::vector<std::pair<std::string, StepSummary>> steps;      // job, summary
  std::vector<std::pair<std::string, RankProgress>> progress;  // job, progress
  uint64_t dropped_steps = 0;
};

// Bounds that keep every time a decoded batch yields, and its clock conversion, far from
// overflow: instants in [0, 2^62) ns (until 2116), spans within a day.
inline constexpr int64_t kMaxWatchTimeNs = int64_t{1} << 62;
inline constexpr int64_t kMaxWatchSpanNs = int64_t{86'400} * 1'000'000'000;

// Refuses a batch that breaks a bound or points outside its tables, naming what.
absl::StatusOr<DecodedWatch> DecodeWatchBatch(const v1::WatchBatch& batch,
                                              const WatchWireLimits& limits = {});

// Moves every time of `data` from the agent's clock to the coordinator's.
void AlignWatch(const ClockModel& model, DecodedWatch* data);

}  // namespace podscope::common
