// Alert rules (docs/watch.md): what the detectors look for on every watched job, with what
// thresholds and hysteresis. Stored as JSON (PUT /v1/alerts/rules), every key checked.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/time_types.h"

namespace podscope::coordinator::watch {

using common::TimeNs;

enum class AlertKind : uint8_t {
  kStraggler,
  kHang,
  kRegression,
  kExposedCommunication,
  kAllReduceEfficiency,
  kRanksNotReporting,  // ranks the job had that report no more steps (their process or agent gone)
};
std::string_view AlertKindName(AlertKind kind);

// Fire after `fire_after` of the last `of_windows` evaluations found the condition; resolve
// after `resolve_after` clean evaluations in a row, so a flapping rank does not spam.
struct Hysteresis {
  int32_t fire_after = 3;
  int32_t of_windows = 5;
  int32_t resolve_after = 5;
};

struct AlertRule {
  std::string name;  // unique in a rule set; alerts name it
  AlertKind kind = AlertKind::kStraggler;
  bool enabled = true;
  std::string job;  // empty: every job
  Hysteresis hysteresis;
  bool capture_evidence = true;  // trigger a capture of the job when it fires

  // straggler (analysis/stragglers.h's caused-delay criterion, the offline report's defaults)
  double min_share_of_caused_delay = 0.2;
  double min_share_of_step_time = 0.005;
  double min_last_arriver_share = 0.05;
  // regression: the window's median step time against the median of the steps before it
  double max_slowdown = 0.10;
  int32_t min_baseline_steps = 40;
  // exposed_communication: median over ranks of the share of step time spent in the step's
  // exposed communication tail
  double max_exposed_share = 0.25;
  // allreduce_efficiency: bytes-weighted AllReduce bus bandwidth against the link (off without one)
  double link_gbytes_per_s = 0;
  double min_efficiency = 0.5;
  // hang: ranks missing from a collective others entered, for longer than this
  TimeNs hang_after_ns = 60'000'000'000;
};

struct RuleSet {
  int32_t window_steps = 20;     // detectors look at the last N settled steps of a job
  int32_t baseline_steps = 100;  // regression baseline: up to this many steps before the window
  TimeNs evidence_interval_ns =
      600'000'000'000;                          // at most one evidence capture per job per interval
  TimeNs evidence_duration_ns = 2'000'000'000;  // how long an evidence capture records
  std::vector<AlertRule> rules;
};

inline constexpr size_t kMaxRules = 64;

// One rule of each kind, enabled, with the defaults above (allreduce_efficiency stays silent
// until a link bandwidth is set).
RuleSet DefaultRules();

// Strict: unknown keys are named (with the closest known one), values out of range give their
// range, names must be unique. The error is a sentence for a 400. "set_aside", which GET adds,
// is read-only and ignored.
absl::StatusOr<RuleSet> ParseRules(std::string_view json);
std::string RulesToJson(const RuleSet& rules);

}  // namespace podscope::coordinator::watch
