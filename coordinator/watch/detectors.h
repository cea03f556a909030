// Online detectors (docs/watch.md): pure functions over a job's window (job_watch.h) or its
// communicators' progress, one per alert kind. Each returns what it found now; hysteresis is
// the alert tracker's business.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/watch/alert_rules.h"
#include "coordinator/watch/job_watch.h"

namespace podscope::coordinator::watch {

struct Evidence {
  std::string name;
  double number = 0;
  std::string text;  // set instead of number for names (an op, a communicator)
};

struct Finding {
  AlertKind kind = AlertKind::kStraggler;
  // What the finding is about, the same across evaluations: "rank 5", "job",
  // "communicator 0x1f2e". The tracker keys hysteresis on it.
  std::string subject;
  std::vector<int32_t> ranks;
  std::vector<std::string> hosts;  // of those ranks, where known (the watch engine fills them)
  std::vector<Evidence> evidence;
  std::vector<int64_t> steps;     // the steps that show it
  int64_t window_last_step = -1;  // the newest step of the window it was found in (-1: hangs)
  // hang: each rank's last completed sequence in the communicator (rank, sequence; -1: none)
  std::vector<std::pair<int32_t, int64_t>> last_completed;
  std::string message;  // one line for a person
};

// Ranks whose caused delay over the window meets the offline report's criterion
// (analysis::IsCausedDelayStraggler), most caused delay first.
std::vector<Finding> FindStragglers(const WindowStats& window, const AlertRule& rule);

// The window's median step time against the median of the steps before it.
std::vector<Finding> FindRegression(const WindowStats& window, const AlertRule& rule);

// The median rank's exposed communication tail as a share of its step time.
std::vector<Finding> FindExposedCommunication(const WindowStats& window, const AlertRule& rule);

// Bytes-weighted AllReduce bus bandwidth against the rule's link bandwidth (none without one).
std::vector<Finding> FindAllReduceInefficiency(const WindowStats& window, const AlertRule& rule);
// Ranks the job had that report no more steps (WindowStats::missing_ranks), with their agents.
std::vector<Finding> FindRanksNotReporting(const WindowStats& window);

// Communicators where some ranks entered sequence s and others have not, for longer than the
// rule's threshold at `now` (coordinator clock): names the missing ranks, the collective and
// every rank's last completed sequence. A rank whose report predates the newest collective that
// completed anywhere (it must have entered that one) holds the finding back until its newer
// report comes or twice the threshold has passed.
std::vector<Finding> FindHangs(const std::vector<CommunicatorProgress>& progress, TimeNs now,
                               const AlertRule& rule);

// The step-based detector for a rule's kind (not hang).
std::vector<Finding> Detect(const WindowStats& window, const AlertRule& rule);

}  // namespace podscope::coordinator::watch
