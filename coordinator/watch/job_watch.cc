#include "coordinator/watch/job_watch.h"

#include <algorithm>
#include <utility>

#include "analysis/collective_bandwidth.h"
#include "analysis/statistics.h"
#include "common/str_util.h"

namespace podscope::coordinator::watch {

using analysis::Median;

namespace {

// Estimates of what each record costs beside its own struct: map and hash-table nodes, strings.
constexpr size_t kRankBytes = 128;
constexpr size_t kNodeBytes = 64;

}  // namespace

JobWatch::JobWatch(WatchLimits limits, WatchMemory* shared) : limits_(limits), shared_(shared) {}

JobWatch::~JobWatch() {
  if (shared_ != nullptr) shared_->used -= bytes_;
}

bool JobWatch::Fits(size_t more) {
  if (bytes_ + more <= limits_.max_bytes &&
      (shared_ == nullptr || shared_->used + more <= shared_->limit)) {
    return true;
  }
  ++counters_.over_memory;
  if (shared_ != nullptr) ++shared_->refused;
  return false;
}

void JobWatch::Charge(size_t bytes) {
  bytes_ += bytes;
  if (shared_ != nullptr) shared_->used += bytes;
}

void JobWatch::Release(size_t bytes) {
  bytes = std::min(bytes, bytes_);
  bytes_ -= bytes;
  if (shared_ != nullptr) shared_->used -= bytes;
}

size_t JobWatch::RecordBytes(const StepRecord& r) {
  return kNodeBytes + sizeof(StepRecord) + r.cells.size() * sizeof(Cell);
}

size_t JobWatch::PendingBytes(const PendingCollective& c) {
  return kNodeBytes + sizeof(CollectiveKey) + sizeof(PendingCollective) +
         c.arrivals.size() * sizeof(Arrival);
}

void JobWatch::SetHost(int32_t rank, std::string host) {
  const int64_t index = RankIndex(rank);
  if (index >= 0) hosts_[static_cast<size_t>(index)] = std::move(host);
}

int64_t JobWatch::RankIndex(int32_t rank) {
  if (auto it = rank_index_.find(rank); it != rank_index_.end()) return it->second;
  if (ranks_.size() >= limits_.max_ranks || !Fits(kRankBytes)) return -1;
  Charge(kRankBytes);
  const auto index = static_cast<uint32_t>(ranks_.size());
  rank_index_.emplace(rank, index);
  ranks_.push_back(rank);
  hosts_.emplace_back();
  rank_newest_.push_back(-1);
  rank_absent_since_.push_back(INT64_MIN);
  rank_retired_.push_back(false);
  return index;
}

JobWatch::StepRecord* JobWatch::Record(int64_t step) {
  if (step > settled_through_) {
    if (auto it = unsettled_.find(step); it != unsettled_.end()) return &it->second;
    const size_t cost = kNodeBytes + sizeof(StepRecord);
    if (!Fits(cost + ranks_.size() * sizeof(Cell))) return nullptr;
    Charge(cost);
    return &unsettled_[step];
  }
  for (auto& [number, record] : window_) {
    if (number == step) return &record;
  }
  return nullptr;
}

JobWatch::Cell& JobWatch::CellIn(StepRecord& record, uint32_t rank_index) {
  if (record.cells.size() <= rank_index) {
    Charge((ranks_.size() - record.cells.size()) * sizeof(Cell));
    record.cells.resize(ranks_.size());
  }
  return record.cells[rank_index];
}

JobWatch::Cell* JobWatch::CellOf(int64_t step, uint32_t rank_index) {
  StepRecord* r = Record(step);
  return r == nullptr ? nullptr : &CellIn(*r, rank_index);
}

absl::Status JobWatch::Add(const common::StepSummary& s) {
  auto refuse = [&](std::string why) {
    ++counters_.rejected_summaries;
    return absl::InvalidArgumentError(
        common::StrCat("step summary of rank ", s.rank, " step ", s.step, ": ", why));
  };
  if (s.rank < 0) return refuse("negative rank");
  if (s.step < 0) return refuse("negative step");
  if (s.end_ns < s.start_ns) return refuse("ends before it starts");
  if (s.collectives.size() > limits_.max_collectives_per_summary) {
    return refuse(
        common::StrCat("more than ", limits_.max_collectives_per_summary, " collectives"));
  }
  for (const common::CollectiveArrival& a : s.collectives) {
    if (a.end_ns < a.start_ns || a.sequence < 0 || a.nranks < 1 ||
        static_cast<size_t>(a.nranks) > limits_.max_ranks || a.bytes < 0) {
      return refuse(common::StrCat("collective ", a.sequence, " is malformed"));
    }
  }
  const int64_t index = RankIndex(s.rank);
  if (index < 0) {
    ++counters_.dropped_ranks;
    return absl::OkStatus();
  }
  const auto r = static_cast<uint32_t>(index);
  // A rank far behind its own newest step is a new run of the job (step numbers restart).
  if (rank_newest_[r] >= 0 && s.step + limits_.window_steps < rank_newest_[r]) {
    ++counters_.restarts;
    Reset();
    return Add(s);
  }
  if (s.step <= settled_through_ && Record(s.step) == nullptr) {
    ++counters_.late_summaries;
    return absl::OkStatus();
  }
  StepRecord* record = Record(s.step);
  if (record == nullptr) return absl::OkStatus();  // over the memory bound: counted there
  Cell* cell = &CellIn(*record, r);
  ++counters_.summaries;
  if (cell->present) return absl::OkStatus();  // a resent summary
  cell->present = true;
  record->newest_end_ns = std::max(record->newest_end_ns, s.end_ns);
  cell->step_ns = s.end_ns - s.start_ns;
  // The exposed tail: the step's last collective (waiting plus transfer) cannot hide behind the
  // backward pass, whose end makes its gradients ready.
  const common::CollectiveArrival* last = nullptr;
  for (const common::CollectiveArrival& a : s.collectives) {
    if (last == nullptr || a.start_ns > last->start_ns) last = &a;
  }
  if (last != nullptr) cell->exposed_ns = last->end_ns - last->start_ns;
  rank_newest_[r] = std::max(rank_newest_[r], s.step);
  rank_absent_since_[r] = INT64_MIN;  // reporting (again)
  rank_retired_[r] = false;
  newest_step_ = std::max(newest_step_, s.step);
  for (const common::CollectiveArrival& a : s.collectives) {
    AddArrival(a, r, s.step);
    common::RankProgress p;
    p.rank = s.rank;
    p.communicator = a.communicator;
    p.nranks = a.nranks;
    p.entered_sequence = p.completed_sequence = a.sequence;
    p.entered_ns = a.start_ns;
    p.completed_ns = a.end_ns;
    p.entered_op = a.op;
    p.entered_bytes = a.bytes;
    UpdateProgress(p);
  }
  return absl::OkStatus();
}

void JobWatch::Add(const common::RankProgress& p) {
  if (p.rank < 0 || p.nranks < 1 || static_cast<size_t>(p.nranks) > limits_.max_ranks) return;
  if (RankIndex(p.rank) < 0) {
    ++counters_.dropped_ranks;
    return;
  }
  UpdateProgress(p);
}

void JobWatch::UpdateProgress(const common::RankProgress& p) {
  auto it = progress_.find(p.communicator);
  if (it == progress_.end()) {
    if (progress_.size() >= limits_.max_communicators) {
      ++counters_.dropped_communicators;
      return;
    }
    if (!Fits(kNodeBytes + sizeof(CommunicatorState))) return;
    Charge(kNodeBytes + sizeof(CommunicatorState));
    it = progress_.emplace(p.communicator, CommunicatorState{}).first;
  }
  if (!it->second.ranks.contains(p.rank)) {
    if (!Fits(kNodeBytes + sizeof(common::RankProgress))) return;
    Charge(kNodeBytes + sizeof(common::RankProgress));
  }
  it->second.nranks = std::max(it->second.nranks, p.nranks);
  auto [slot, inserted] = it->second.ranks.try_emplace(p.rank, p);
  if (inserted) return;
  common::RankProgress& mine = slot->second;
  if (p.entered_sequence > mine.entered_sequence) {
    mine.entered_sequence = p.entered_sequence;
    mine.entered_ns = p.entered_ns;
    mine.entered_op = p.entered_op;
    mine.entered_bytes = p.entered_bytes;
  }
  if (p.completed_sequence > mine.completed_sequence) {
    mine.completed_sequence = p.completed_sequence;
    mine.completed_ns = p.completed_ns;
  }
}

void JobWatch::AddArrival(const common::CollectiveArrival& a, uint32_t rank_index, int64_t step) {
  if (a.nranks < 2) return;  // nobody to wait for
  const CollectiveKey key{a.communicator, a.sequence};
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    if (pending_.size() >= limits_.max_pending_collectives) {
      ++counters_.unmatched_collectives;
      return;
    }
    if (!Fits(PendingBytes(PendingCollective{}) + sizeof(Arrival))) return;
    Charge(PendingBytes(PendingCollective{}));
    PendingCollective c;
    c.op = a.op;
    c.nranks = a.nranks;
    c.first_step = step;
    it = pending_.emplace(key, std::move(c)).first;
  }
  PendingCollective& c = it->second;
  for (const Arrival& other : c.arrivals) {
    if (other.rank_index == rank_index) return;  // resent
  }
  c.bytes = std::max(c.bytes, a.bytes);
  c.first_step = std::min(c.first_step, step);
  Charge(sizeof(Arrival));
  c.arrivals.push_back(Arrival{rank_index, step, a.start_ns, a.end_ns});
  if (c.arrivals.size() >= static_cast<size_t>(c.nranks)) {
    Resolve(c);
    Release(PendingBytes(c));
    pending_.erase(it);
  }
}

// As analysis/stragglers.cc defines it: wait_r = min(last arrival - a_r, duration_r);
// the last arriver (least wait, the lowest rank on a tie) caused the second-least wait minus its
// own.
void JobWatch::Resolve(const PendingCollective& c) {
  std::vector<Arrival> by_rank = c.arrivals;
  std::sort(by_rank.begin(), by_rank.end(), [&](const Arrival& x, const Arrival& y) {
    return ranks_[x.rank_index] < ranks_[y.rank_index];
  });
  TimeNs last_arrival = by_rank.front().start;
  for (const Arrival& a : by_rank) last_arrival = std::max(last_arrival, a.start);
  std::vector<TimeNs> wait(by_rank.size()), transfer(by_rank.size());
  size_t last = SIZE_MAX, second = SIZE_MAX;
  for (size_t i = 0; i < by_rank.size(); ++i) {
    const TimeNs duration = by_rank[i].end - by_rank[i].start;
    wait[i] = std::min(last_arrival - by_rank[i].start, duration);
    transfer[i] = duration - wait[i];
    if (Cell* cell = CellOf(by_rank[i].step, by_rank[i].rank_index)) ++cell->collectives;
    if (last == SIZE_MAX || wait[i] < wait[last]) {
      second = last;
      last = i;
    } else if (second == SIZE_MAX || wait[i] < wait[second]) {
      second = i;
    }
  }
  const Arrival& late = by_rank[last];
  StepRecord* record = Record(late.step);
  if (Cell* cell = CellOf(late.step, late.rank_index)) {
    ++cell->last_arrivals;
    cell->caused_ns += wait[second] - wait[last];
  }
  const TimeNs t = Median(transfer);
  if (record != nullptr && c.op == common::CollectiveOp::kAllReduce && t > 0 && c.bytes > 0) {
    const double busbw = static_cast<double>(c.bytes) / (static_cast<double>(t) * 1e-9) / 1e9 *
                         analysis::BusBandwidthFactor(c.op, c.nranks);
    record->allreduce_bytes += static_cast<double>(c.bytes);
    record->allreduce_busbw_bytes += busbw * static_cast<double>(c.bytes);
  }
}

void JobWatch::EvictPendingBefore(int64_t step) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.first_step < step) {
      ++counters_.unmatched_collectives;
      Release(PendingBytes(it->second));
      pending_.erase(it++);
    } else {
      ++it;
    }
  }
}

std::vector<WindowStats> JobWatch::Settle(TimeNs now) {
  std::vector<WindowStats> out;
  while (!unsettled_.empty()) {
    const int64_t step = unsettled_.begin()->first;
    bool everyone_past = true;
    for (size_t i = 0; i < rank_newest_.size(); ++i)
      everyone_past = everyone_past && (rank_newest_[i] > step || rank_retired_[i]);
    const TimeNs end = unsettled_.begin()->second.newest_end_ns;
    const bool overdue =
        now != INT64_MIN && end != INT64_MIN && now - end >= limits_.settle_after_ns;
    if (!everyone_past && !overdue && step > newest_step_ - limits_.settle_lag_steps) break;
    window_.emplace_back(step, std::move(unsettled_.begin()->second));
    unsettled_.erase(unsettled_.begin());
    settled_through_ = step;
    std::vector<TimeNs> times;
    for (const Cell& c : window_.back().second.cells) {
      if (c.present) times.push_back(c.step_ns);
    }
    window_.back().second.median_step_ns = Median(std::move(times));
    while (window_.size() > static_cast<size_t>(limits_.window_steps)) {
      baseline_.push_back(window_.front().second.median_step_ns);
      while (baseline_.size() > static_cast<size_t>(limits_.baseline_steps)) baseline_.pop_front();
      Release(RecordBytes(window_.front().second));
      window_.pop_front();
    }
    EvictPendingBefore(window_.front().first);
    out.push_back(Window(now));
  }
  return out;
}

WindowStats JobWatch::Window(TimeNs now) {
  WindowStats w;
  w.first_step = window_.front().first;
  w.last_step = window_.back().first;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const int64_t newest = rank_newest_[i];
    if (newest < 0 || newest > w.last_step - kMissingAfterSteps || rank_retired_[i]) continue;
    // Absent. Without a clock (Settle() without a time) it counts as not reporting at once.
    if (rank_absent_since_[i] == INT64_MIN) rank_absent_since_[i] = now;
    const TimeNs absent_for = now == INT64_MIN ? INT64_MAX : now - rank_absent_since_[i];
    if (now != INT64_MIN && absent_for >= kRetireAbsentAfterNs) {
      rank_retired_[i] = true;
      continue;
    }
    w.absent_ranks.push_back(ranks_[i]);
    if (absent_for < kNotReportingAfterNs) continue;
    w.missing_ranks.push_back(ranks_[i]);
    w.missing_since_step = std::max(w.missing_since_step, newest);
  }
  std::sort(w.absent_ranks.begin(), w.absent_ranks.end());
  std::sort(w.missing_ranks.begin(), w.missing_ranks.end());
  w.full = window_.size() >= static_cast<size_t>(limits_.window_steps) && w.absent_ranks.empty();
  std::vector<RankWindow> by_index(ranks_.size());
  for (const auto& [step, record] : window_) {
    for (size_t i = 0; i < record.cells.size(); ++i) {
      const Cell& c = record.cells[i];
      RankWindow& r = by_index[i];
      r.caused_delay_ns += c.caused_ns;
      r.last_arrivals += c.last_arrivals;
      r.collectives += c.collectives;
      if (c.caused_ns > 0) r.late_steps.push_back(step);
      r.largest_step_caused_ns = std::max(r.largest_step_caused_ns, c.caused_ns);
      if (!c.present) continue;
      r.step_time_ns += c.step_ns;
      r.exposed_comm_ns += c.exposed_ns;
      ++r.steps;
    }
    w.step_time_ns.push_back(record.median_step_ns);
    w.allreduce_bytes += record.allreduce_bytes;
    w.allreduce_busbw_gbytes_per_s += record.allreduce_busbw_bytes;
  }
  if (w.allreduce_bytes > 0) w.allreduce_busbw_gbytes_per_s /= w.allreduce_bytes;
  std::vector<size_t> order;
  for (size_t i = 0; i < by_index.size(); ++i) {
    if (by_index[i].steps > 0 || by_index[i].collectives > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranks_[a] < ranks_[b]; });
  std::vector<TimeNs> sums;
  for (size_t i : order) {
    by_index[i].rank = ranks_[i];
    w.total_caused_delay_ns += by_index[i].caused_delay_ns;
    if (by_index[i].steps > 0) sums.push_back(by_index[i].step_time_ns);
    w.ranks.push_back(std::move(by_index[i]));
    w.hosts.push_back(hosts_[i]);
  }
  w.window_step_time_ns = Median(std::move(sums));
  w.baseline_step_time_ns.assign(baseline_.begin(), baseline_.end());
  return w;
}

std::vector<CommunicatorProgress> JobWatch::Progress() const {
  std::vector<CommunicatorProgress> out;
  out.reserve(progress_.size());
  for (const auto& [communicator, state] : progress_) {
    CommunicatorProgress p;
    p.communicator = communicator;
    p.nranks = state.nranks;
    for (const auto& [rank, progress] : state.ranks) p.ranks.push_back(progress);
    std::sort(p.ranks.begin(), p.ranks.end(),
              [](const common::RankProgress& a, const common::RankProgress& b) {
                return a.rank < b.rank;
              });
    out.push_back(std::move(p));
  }
  return out;
}

void JobWatch::Reset() {
  std::vector<std::pair<int32_t, std::string>> hosts;  // a new run keeps its hosts
  for (size_t i = 0; i < ranks_.size(); ++i) hosts.emplace_back(ranks_[i], std::move(hosts_[i]));
  ranks_.clear();
  hosts_.clear();
  rank_newest_.clear();
  rank_absent_since_.clear();
  rank_retired_.clear();
  rank_index_.clear();
  unsettled_.clear();
  window_.clear();
  baseline_.clear();
  pending_.clear();
  progress_.clear();
  Release(bytes_);
  newest_step_ = -1;
  settled_through_ = -1;
  for (auto& [rank, host] : hosts) SetHost(rank, std::move(host));
}

}  // namespace podscope::coordinator::watch
