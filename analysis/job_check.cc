#include "analysis/job_check.h"

#include <map>
#include <set>

#include "common/str_util.h"

namespace podscope::analysis {
namespace {

// "0-3,5,9": sorted ranks as ranges.
std::string Ranges(const std::set<int32_t>& ranks) {
  std::string out;
  for (auto it = ranks.begin(); it != ranks.end();) {
    const int32_t first = *it;
    int32_t last = first;
    for (++it; it != ranks.end() && *it == last + 1; ++it) last = *it;
    common::StrAppend(&out, out.empty() ? "" : ",", first);
    if (last != first) common::StrAppend(&out, "-", last);
  }
  return out;
}

}  // namespace

JobCheck CheckOneJob(const common::CaptureView& capture) {
  JobCheck check;
  std::map<std::string, std::set<int32_t>> by_job;
  std::map<int32_t, std::set<int32_t>> by_world;
  std::map<int32_t, int> seen;
  for (size_t i = 0; i < capture.size(); ++i) {
    const common::WorkerInfo& w = capture.worker(i).info;
    if (!w.job.empty()) by_job[w.job].insert(w.rank);
    if (w.world_size > 0) by_world[w.world_size].insert(w.rank);
    if (w.rank >= 0) ++seen[w.rank];  // a trace without distributedInfo has no rank to compare
  }
  auto mixed = [&check](std::string warning) {
    check.mixed = true;
    check.warnings.push_back(std::move(warning));
  };
  if (by_job.size() > 1) {
    std::string jobs;
    for (const auto& [job, ranks] : by_job)
      common::StrAppend(&jobs, jobs.empty() ? "" : "; ", job, ": ranks ", Ranges(ranks));
    mixed(common::StrCat("the inputs hold ", by_job.size(), " jobs (", jobs, ")"));
  }
  if (by_world.size() > 1) {
    std::string worlds;
    for (const auto& [size, ranks] : by_world)
      common::StrAppend(&worlds, worlds.empty() ? "" : "; ", size, ": ranks ", Ranges(ranks));
    mixed(common::StrCat("the ranks disagree on the world size (", worlds, ")"));
  }
  std::set<int32_t> twice;
  for (const auto& [rank, count] : seen) {
    if (count > 1) twice.insert(rank);
  }
  if (!twice.empty()) {
    mixed(common::StrCat(
        "ranks ", Ranges(twice),
        " appear more than once (stale files from an earlier run in the same folder?)"));
  }
  if (by_world.size() == 1) {
    const int32_t world = by_world.begin()->first;
    std::set<int32_t> outside, missing;
    for (const auto& [rank, count] : seen) {
      if (rank >= world) outside.insert(rank);
    }
    if (!outside.empty())
      mixed(common::StrCat("ranks ", Ranges(outside), " are not in a world of ", world));
    for (int32_t r = 0; r < world; ++r) {
      if (!seen.contains(r)) missing.insert(r);
    }
    if (!missing.empty()) {
      check.warnings.push_back(common::StrCat(missing.size(), " of ", world, " ranks are missing (",
                                              Ranges(missing),
                                              "): pod-wide figures cover the others only"));
    }
  }
  return check;
}

}  // namespace podscope::analysis
