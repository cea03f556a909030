// Watching on /metrics (docs/watch.md), in Prometheus' text format: what the coordinator took from
// the agents, the alerts firing, and per job the window's figures. Bounded however large the
// jobs: per-job series for at most EngineLimits::max_jobs jobs, and per-rank series only for
// the few ranks that caused the most delay (a 1024-rank job adds 8 rank series, not 1024).
#pragma once

#include <string>

#include "coordinator/watch/watch_service.h"

namespace podscope::coordinator {

inline constexpr size_t kMetricsTopRanks = 8;

void AppendWatchMetrics(const watch::WatchService& watch, std::string* out);

// A label value as the text format wants it: backslash, double quote and newline escaped.
std::string PromLabelValue(std::string_view value);

}  // namespace podscope::coordinator
