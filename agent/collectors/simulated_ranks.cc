#include "agent/collectors/simulated_ranks.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <future>

#include "absl/container/flat_hash_map.h"
#include "common/parse_number.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "common/trace_slice.h"

namespace podscope::agent {

namespace {

bool ParseInt(std::string_view text, int64_t* out) {
  absl::StatusOr<int64_t> n = common::ParseInt(text);
  if (n.ok()) *out = *n;
  return n.ok();
}

bool ParseDouble(std::string_view text, double* out) {
  absl::StatusOr<double> x = common::ParseDouble(text);
  if (x.ok()) *out = *x;
  return x.ok();
}

// Unix seconds (fractions allowed) as nanoseconds, within 1970..2100.
bool ParseUnixSeconds(std::string_view text, TimeNs* out) {
  double seconds = 0;
  if (!ParseDouble(text, &seconds) || !(seconds >= 0 && seconds < 4.1e9)) return false;
  *out = static_cast<TimeNs>(seconds * 1e9);
  return true;
}

// Process-wide index of simulated segments: agents of one process (the scale benchmark runs
// many) and successive captures share a segment while any of them holds it, and the first caller
// of a key simulates it while the others wait for that result instead of repeating it. The index
// keeps no segment alive: the recordings that read one hold it, so an agent between captures
// holds none.
class SegmentCache {
 public:
  std::shared_ptr<const sim::Workload> Get(const std::string& key,
                                           const std::function<sim::Workload()>& make) {
    std::shared_future<std::shared_ptr<const sim::Workload>> pending;
    std::promise<std::shared_ptr<const sim::Workload>> promise;
    {
      absl::MutexLock lock(&mu_);
      Entry& entry = entries_[key];
      if (std::shared_ptr<const sim::Workload> alive = entry.made.lock()) return alive;
      if (entry.pending.valid()) {
        pending = entry.pending;
      } else {
        entry.pending = promise.get_future().share();
      }
    }
    if (pending.valid()) return pending.get();
    std::shared_ptr<const sim::Workload> made;
    try {
      made = std::make_shared<const sim::Workload>(make());
    } catch (...) {
      // Those waiting get the exception; the next caller simulates afresh.
      promise.set_exception(std::current_exception());
      absl::MutexLock lock(&mu_);
      entries_.erase(key);
      throw;
    }
    promise.set_value(made);
    absl::MutexLock lock(&mu_);
    entries_[key] = Entry{.pending = {}, .made = made};
    absl::erase_if(entries_, [](const auto& e) {
      return !e.second.pending.valid() && e.second.made.expired();
    });
    return made;
  }

 private:
  struct Entry {
    std::shared_future<std::shared_ptr<const sim::Workload>> pending;  // while being simulated
    std::weak_ptr<const sim::Workload> made;
  };
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

SegmentCache& Cache() {
  static SegmentCache* cache = new SegmentCache();
  return *cache;
}

// One KEY=VALUE of --simulate applied to `spec`; an error names the key, the value and the range.
absl::Status ApplySimulationKey(std::string_view key, std::string_view value, SimulationSpec* spec,
                                bool* world_given) {
  int64_t n = 0;
  auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(common::StrCat("--simulate ", key, "=", value, ": ", what));
  };
  if (key == "ranks") {
    const size_t dash = value.find('-');
    int64_t first = 0, last = 0;
    if (dash == std::string_view::npos) {
      if (!ParseInt(value, &first)) return bad("expected RANK or FIRST-LAST");
      last = first;
    } else if (!ParseInt(value.substr(0, dash), &first) ||
               !ParseInt(value.substr(dash + 1), &last)) {
      return bad("expected RANK or FIRST-LAST");
    }
    if (first < 0 || last < first || last >= 65536)
      return bad("ranks must satisfy 0 <= FIRST <= LAST < 65536");
    spec->first_rank = static_cast<int32_t>(first);
    spec->last_rank = static_cast<int32_t>(last);
  } else if (key == "world") {
    if (!ParseInt(value, &n) || n < 1 || n > 65536) return bad("world must be in 1..65536");
    spec->world = static_cast<int32_t>(n);
    *world_given = true;
  } else if (key == "job") {
    if (value.empty() || value.size() > 128) return bad("job must be 1-128 characters");
    spec->job = std::string(value);
  } else if (key == "seed") {
    if (!ParseInt(value, &n) || n < 0) return bad("seed must be a non-negative integer");
    spec->seed = static_cast<uint64_t>(n);
  } else if (key == "straggler") {
    absl::StatusOr<sim::Slowdown> slow = sim::ParseSlowdown(value);
    if (!slow.ok()) return bad(std::string(slow.status().message()));
    spec->stragglers.push_back(*slow);
  } else if (key == "straggler-at") {
    // Unix times, so that every agent of the job agrees when the slowdown begins and ends.
    const size_t dash = value.find('-');
    if (!ParseUnixSeconds(value.substr(0, dash), &spec->straggler_from_ns) ||
        (dash != std::string_view::npos &&
         !ParseUnixSeconds(value.substr(dash + 1), &spec->straggler_until_ns))) {
      return bad("expected T0 or T0-T1, Unix seconds");
    }
    if (spec->straggler_until_ns <= spec->straggler_from_ns) return bad("T1 must be after T0");
  } else if (key == "hang") {
    const size_t at = value.find('@');
    if (at == std::string_view::npos || !ParseInt(value.substr(0, at), &n) || n < 0 || n >= 65536 ||
        !ParseUnixSeconds(value.substr(at + 1), &spec->hang.at_ns)) {
      return bad("expected RANK@T, T in Unix seconds");
    }
    spec->hang.rank = static_cast<int32_t>(n);
  } else if (key == "clock-offset-ms") {
    if (!ParseDouble(value, &spec->clock_offset_ms) || std::abs(spec->clock_offset_ms) > 3.6e6) {
      return bad("expected milliseconds within +-1 hour");
    }
  } else if (key == "drift-ppm") {
    if (!ParseDouble(value, &spec->drift_ppm) || std::abs(spec->drift_ppm) > 500)
      return bad("expected ppm within +-500");
  } else if (key == "sim-world") {
    if (!ParseInt(value, &n) || n < 1 || n > 65536) return bad("sim-world must be in 1..65536");
    spec->sim_world = static_cast<int32_t>(n);
  } else if (key == "profile") {
    if (value != "default" && value != "light" && value != "dense")
      return bad("profile is default, light or dense");
    spec->profile = std::string(value);
  } else {
    return absl::InvalidArgumentError(
        common::StrCat("--simulate: unknown key \"", key,
                       "\" (known: ranks, world, job, seed, straggler, straggler-at, hang, "
                       "clock-offset-ms, drift-ppm, profile, "
                       "sim-world)"));
  }
  return absl::OkStatus();
}

// What no single key can check: the ranks within the world, stragglers and the hang among the
// simulated ranks.
absl::Status FinishSimulationSpec(bool world_given, SimulationSpec* spec) {
  if (!world_given) spec->world = spec->last_rank + 1;
  if (spec->last_rank >= spec->world) {
    return absl::InvalidArgumentError(common::StrCat("--simulate: ranks ", spec->first_rank, "-",
                                                     spec->last_rank,
                                                     " do not fit in world=", spec->world));
  }
  if (spec->sim_world > spec->world) spec->sim_world = 0;
  const int32_t simulated = spec->sim_world > 0 ? spec->sim_world : spec->world;
  for (sim::Slowdown& s : spec->stragglers) {
    if (s.rank >= simulated) {
      return absl::InvalidArgumentError(common::StrCat("--simulate: straggler rank ", s.rank,
                                                       " is not below world=", spec->world));
    }
    s.from_ns = spec->straggler_from_ns;
    s.until_ns = spec->straggler_until_ns;
  }
  if (spec->hang.rank >= simulated) {
    return absl::InvalidArgumentError(common::StrCat("--simulate: hang rank ", spec->hang.rank,
                                                     " is not below world=", spec->world));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SimulationSpec> ParseSimulationSpec(std::string_view text) {
  SimulationSpec spec;
  bool world_given = false;
  for (std::string_view item : common::Split(text, ',')) {
    item = common::StripWhitespace(item);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return absl::InvalidArgumentError(
          common::StrCat("--simulate: \"", item, "\" is not KEY=VALUE"));
    }
    if (absl::Status s =
            ApplySimulationKey(item.substr(0, eq), item.substr(eq + 1), &spec, &world_given);
        !s.ok())
      return s;
  }
  RETURN_IF_ERROR(FinishSimulationSpec(world_given, &spec));
  return spec;
}

SimulatedRanksCollector::SimulatedRanksCollector(SimulationSpec spec, std::string host,
                                                 const AgentClock& clock)
    : spec_(std::move(spec)), host_(std::move(host)), clock_(clock) {
  base_.ranks = spec_.sim_world > 0 ? spec_.sim_world : spec_.world;
  base_.ranks_per_host = base_.ranks;
  base_.job = spec_.job;
  base_.slowdowns = spec_.stragglers;
  // The profile was checked when the spec was parsed.
  sim::ApplyPreset(spec_.profile, &base_).IgnoreError();
  const TimeNs nominal_step =
      base_.dataloader_ns + base_.forward_ns + base_.backward_ns + base_.optimizer_ns;
  if (spec_.profile == "dense") segment_ns_ = kDenseSegmentNs;
  steps_per_segment_ = static_cast<int32_t>(segment_ns_ / nominal_step) + 1;
  base_.steps = steps_per_segment_;
  // Events only for the timelines served here: with sim-world, rank r is timeline r mod it.
  const int32_t first = spec_.first_rank, last = spec_.last_rank;
  if (last - first + 1 >= base_.ranks || first % base_.ranks > last % base_.ranks) {
    base_.first_written_rank = 0;
    base_.last_written_rank = base_.ranks - 1;
  } else {
    base_.first_written_rank = first % base_.ranks;
    base_.last_written_rank = last % base_.ranks;
  }
}

std::vector<WorkerIdentity> SimulatedRanksCollector::Workers() const {
  std::vector<WorkerIdentity> out;
  for (int32_t r = spec_.first_rank; r <= spec_.last_rank; ++r) {
    out.push_back(WorkerIdentity{r, r - spec_.first_rank, spec_.world, 100000 + r, spec_.job, host_,
                                 "simulated"});
  }
  return out;
}

absl::Status SimulatedRanksCollector::Arm(const CaptureWindow& window) {
  for (int32_t r : window.ranks) {
    if (r < spec_.first_rank || r > spec_.last_rank) {
      return absl::InvalidArgumentError(common::StrCat("rank ", r, " is not simulated here"));
    }
  }
  absl::MutexLock lock(&mu_);
  if (recordings_.count(window.capture_id)) {
    return absl::AlreadyExistsError(
        common::StrCat("capture ", window.capture_id, " is already armed"));
  }
  recordings_.emplace(window.capture_id, Recording{window});
  return absl::OkStatus();
}

absl::Status SimulatedRanksCollector::Start(std::string_view capture_id) {
  const TimeNs now = clock_.Now();
  absl::MutexLock lock(&mu_);
  auto it = recordings_.find(capture_id);
  if (it == recordings_.end())
    return absl::NotFoundError(common::StrCat("capture ", capture_id, " is not armed"));
  it->second.actual_start = now;
  return absl::OkStatus();
}

absl::Status SimulatedRanksCollector::Stop(std::string_view capture_id) {
  const TimeNs now = clock_.Now();
  absl::MutexLock lock(&mu_);
  auto it = recordings_.find(capture_id);
  if (it == recordings_.end())
    return absl::NotFoundError(common::StrCat("capture ", capture_id, " is not armed"));
  if (it->second.actual_start == 0)
    return absl::FailedPreconditionError("stopped before it started");
  it->second.actual_stop = now;
  return absl::OkStatus();
}

sim::WorkloadOptions SimulatedRanksCollector::SegmentOptions(int64_t k) const {
  sim::WorkloadOptions o = base_;
  o.epoch_ns = k * segment_ns_;
  o.first_step = k * steps_per_segment_;
  // A segment launches well under 2^32 operations (a dense rank about 230 k a second); ids stay
  // below 2^52, exact in JSON, and repeat only after 2^20 segments (12 days of dense ones).
  o.first_correlation = 1 + ((k & ((int64_t{1} << 20) - 1)) << 32);
  o.seed = spec_.seed * 1'000'003ull + static_cast<uint64_t>(k);
  return o;
}

std::shared_ptr<const sim::Workload> SimulatedRanksCollector::Segment(int64_t k) const {
  std::string key =
      common::StrCat(spec_.job, "|", spec_.seed, "|", base_.ranks, "|", spec_.profile, "|",
                     base_.first_written_rank, "-", base_.last_written_rank, "|", k);
  for (const sim::Slowdown& s : spec_.stragglers) {
    common::StrAppend(&key, "|", s.rank, ":", s.factor, ":", sim::SlowdownKindName(s.kind), ":",
                      s.from_ns, ":", s.until_ns);
  }
  return Cache().Get(key, [this, k] {
    sim::Workload w = sim::SimulateJob(SegmentOptions(k));
    // A segment ends where the next begins: steps that would overrun it are not part of it.
    for (common::WorkerTrace& t : w.capture.workers)
      common::KeepWindow(k * segment_ns_, (k + 1) * segment_ns_, &t);
    return w;
  });
}

namespace {

uint64_t EventsIn(const std::vector<common::WorkerTrace>& pieces) {
  uint64_t events = 0;
  for (const common::WorkerTrace& piece : pieces) events += piece.Counts().Total();
  return events;
}

std::string OverLimit(uint64_t events, uint64_t limit) {
  return common::StrCat(events, " events exceed the limit of ", limit, " per worker");
}

}  // namespace

absl::StatusOr<SimulatedRanksCollector::Recording> SimulatedRanksCollector::Find(
    std::string_view capture_id, int32_t rank) {
  absl::MutexLock lock(&mu_);
  auto it = recordings_.find(capture_id);
  if (it == recordings_.end())
    return absl::NotFoundError(common::StrCat("capture ", capture_id, " is not armed"));
  const std::vector<int32_t>& ranks = it->second.window.ranks;
  if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) {
    return absl::InvalidArgumentError(
        common::StrCat("rank ", rank, " is not part of capture ", capture_id));
  }
  return it->second;
}

absl::StatusOr<std::vector<common::WorkerTrace>> SimulatedRanksCollector::TakeRecorded(
    std::string_view capture_id, int32_t rank) {
  // Events are handed over once they have ended on true time; what is generated here is held
  // outside the lock (only the capture's own run takes a rank's events).
  const TimeNs now_host = clock_.ToHost(clock_.Now());
  ASSIGN_OR_RETURN(Recording rec, Find(capture_id, rank));
  if (rec.actual_start == 0 || rec.actual_stop != 0) return std::vector<common::WorkerTrace>();
  const TimeNs begin = clock_.ToHost(rec.actual_start);
  const Recording::Taken taken =
      rec.taken.count(rank) ? rec.taken.at(rank) : Recording::Taken{begin - 1, 0};
  if (now_host <= taken.until) return std::vector<common::WorkerTrace>();
  std::vector<std::shared_ptr<const sim::Workload>> segments;
  std::vector<common::WorkerTrace> pieces =
      EventsEndedBetween(rank, begin, taken.until, now_host, &segments);
  const uint64_t events = taken.events + EventsIn(pieces);
  const uint64_t limit = rec.window.max_events_per_worker;
  if (limit > 0 && events > limit) return absl::ResourceExhaustedError(OverLimit(events, limit));
  // The next read starts in the last segment read: only that one is held for it.
  if (segments.size() > 1) segments.erase(segments.begin(), segments.end() - 1);
  absl::MutexLock lock(&mu_);
  if (auto it = recordings_.find(capture_id); it != recordings_.end())
    it->second.taken[rank] = Recording::Taken{now_host, events, std::move(segments)};
  return pieces;
}

absl::StatusOr<CollectedWorker> SimulatedRanksCollector::Drain(std::string_view capture_id,
                                                               int32_t rank) {
  ASSIGN_OR_RETURN(Recording rec, Find(capture_id, rank));
  if (rec.actual_stop == 0) return absl::FailedPreconditionError("drained before it stopped");
  CollectedWorker out;
  out.rank = rank;
  out.actual_start_ns = rec.actual_start;
  out.actual_stop_ns = rec.actual_stop;
  // The window on true (host) time; the job's timeline lives there. What TakeRecorded handed
  // over is not served again.
  const TimeNs begin = clock_.ToHost(rec.actual_start);
  const Recording::Taken taken =
      rec.taken.count(rank) ? rec.taken.at(rank) : Recording::Taken{begin - 1, 0};
  out.pieces = EventsEndedBetween(rank, begin, taken.until, clock_.ToHost(rec.actual_stop));
  const uint64_t events = taken.events + EventsIn(out.pieces);
  const uint64_t limit = rec.window.max_events_per_worker;
  if (limit > 0 && events > limit) {
    out.dropped_events = events - limit;
    out.error = OverLimit(events, limit);
  }
  return out;
}

std::vector<common::WorkerTrace> SimulatedRanksCollector::EventsEndedBetween(
    int32_t rank, TimeNs begin, TimeNs after, TimeNs end,
    std::vector<std::shared_ptr<const sim::Workload>>* segments) const {
  std::vector<common::WorkerTrace> pieces;
  for (int64_t k = std::max(begin, after) / segment_ns_; k <= end / segment_ns_; ++k) {
    std::shared_ptr<const sim::Workload> segment = Segment(k);
    if (segments != nullptr) segments->push_back(segment);
    common::WorkerTrace piece = segment->capture.workers[rank % base_.ranks];
    common::KeepEndedBetween(begin, after, end, &piece);
    piece.info.rank = rank;
    piece.info.world_size = spec_.world;
    common::MapTimes(clock_.skew(), &piece);
    piece.info.host = host_;
    piece.info.local_rank = rank - spec_.first_rank;
    piece.info.pid = 100000 + rank;
    piece.info.source = "sim";
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

void SimulatedRanksCollector::Forget(std::string_view capture_id) {
  absl::MutexLock lock(&mu_);
  if (auto it = recordings_.find(capture_id); it != recordings_.end()) recordings_.erase(it);
}

void SimulatedRanksCollector::StartWatch(WatchSink* sink) {
  {
    absl::MutexLock lock(&watch_mu_);
    watch_stopping_ = false;
  }
  watch_thread_ = std::thread([this, sink] { WatchLoop(sink); });
}

void SimulatedRanksCollector::StopWatch() {
  {
    absl::MutexLock lock(&watch_mu_);
    watch_stopping_ = true;
  }
  if (watch_thread_.joinable()) watch_thread_.join();
}

bool SimulatedRanksCollector::WaitUntilHost(TimeNs host_ns) {
  absl::MutexLock lock(&watch_mu_);
  return !clock_.host_time().AwaitUntil(watch_mu_, absl::Condition(&watch_stopping_), host_ns);
}

common::StepSummary SimulatedRanksCollector::AsServed(common::StepSummary s, int32_t rank) const {
  const common::ClockModel& skew = clock_.skew();
  s.rank = rank;
  s.start_ns = skew.ToAligned(s.start_ns);
  s.end_ns = skew.ToAligned(s.end_ns);
  for (common::CollectiveArrival& c : s.collectives) {
    c.nranks = spec_.world;  // with sim-world, ranks r and r + sim-world share a timeline
    c.enqueue_ns = skew.ToAligned(c.enqueue_ns);
    c.start_ns = skew.ToAligned(c.start_ns);
    c.end_ns = skew.ToAligned(c.end_ns);
  }
  return s;
}

void SimulatedRanksCollector::WatchLoop(WatchSink* sink) {
  std::vector<common::StepSummary> steps;
  for (int64_t k = clock_.host_time().Now() / segment_ns_;; ++k) {
    const TimeNs segment_end = (k + 1) * segment_ns_;
    sim::SummaryModel model(SegmentOptions(k), spec_.hang);
    while (true) {
      steps.clear();
      if (!model.Next(&steps)) break;
      TimeNs last_end = 0;
      for (int32_t r = spec_.first_rank; r <= spec_.last_rank; ++r) {
        last_end = std::max(last_end, steps[static_cast<size_t>(r % base_.ranks)].end_ns);
      }
      // As in the captures' segments, a step overrunning its segment belongs to neither.
      if (last_end > segment_end) break;
      if (!WaitUntilHost(last_end)) return;
      for (int32_t r = spec_.first_rank; r <= spec_.last_rank; ++r) {
        sink->Step(spec_.job, AsServed(steps[static_cast<size_t>(r % base_.ranks)], r));
      }
    }
    if (!model.hung()) {
      if (!WaitUntilHost(segment_end)) return;
      continue;
    }
    // Hung: nothing completes any more. Where each served rank stands, every second.
    if (!WaitUntilHost(model.now())) return;
    for (TimeNs t = model.now();; t += 1'000'000'000) {
      for (int32_t r = spec_.first_rank; r <= spec_.last_rank; ++r) {
        common::RankProgress p = model.progress()[static_cast<size_t>(r % base_.ranks)];
        p.rank = r;
        p.nranks = spec_.world;
        if (p.entered_sequence >= 0) p.entered_ns = clock_.FromHost(p.entered_ns);
        if (p.completed_sequence >= 0) p.completed_ns = clock_.FromHost(p.completed_ns);
        sink->Progress(spec_.job, p);
      }
      if (!WaitUntilHost(t + 1'000'000'000)) return;
    }
  }
}

}  // namespace podscope::agent
