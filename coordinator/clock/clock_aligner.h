// Keeps every agent's recent clock samples and fits its clock model on demand
// (docs/life-of-a-capture.md). Thread-safe: the gRPC service adds samples, the capture scheduler
// reads models.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "coordinator/clock/clock_fit.h"

namespace podscope::coordinator {

struct ClockAlignerOptions {
  size_t max_samples_per_agent = 256;
  // Older samples are dropped: oscillators wander, so a drift is only linear over minutes.
  int64_t max_sample_age_ns = 600'000'000'000;
  ClockFitOptions fit;
};

class ClockAligner {
 public:
  explicit ClockAligner(ClockAlignerOptions options = {}) : options_(options) {}

  void AddSamples(std::string_view agent_id, std::span<const ClockSample> samples);
  // The agent's current model; FailedPrecondition when it has sent no usable sample yet.
  absl::StatusOr<ClockFit> Fit(std::string_view agent_id) const;
  absl::StatusOr<common::ClockModel> Model(std::string_view agent_id) const {
    ASSIGN_OR_RETURN(ClockFit fit, Fit(agent_id));
    return fit.model;
  }
  size_t SampleCount(std::string_view agent_id) const;
  void Forget(std::string_view agent_id);

 private:
  struct Agent {
    std::deque<ClockSample> samples;
    uint64_t version = 0;  // bumped by every AddSamples
    // The fit of `fit_version`: fits are asked for far more often (every capture, every
    // status page, every resync check) than samples arrive.
    std::shared_ptr<const ClockFit> fit;
    uint64_t fit_version = 0;
  };
  ClockAlignerOptions options_;
  mutable absl::Mutex mu_;
  mutable std::map<std::string, Agent, std::less<>> agents_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podscope::coordinator
