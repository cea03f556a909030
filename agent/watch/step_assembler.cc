#include "agent/watch/step_assembler.h"

#include <algorithm>
#include <limits>

namespace podscope::agent {

void StepAssembler::Add(const std::vector<common::CollectiveArrival>& collectives,
                        const std::vector<MarkedStep>& marks, TimeNs now,
                        std::vector<common::StepSummary>* out) {
  const size_t history = static_cast<size_t>(
      std::max(options_.confirm_periods * options_.max_period, options_.min_window) +
      options_.max_period + 1);
  for (const common::CollectiveArrival& a : collectives) {
    if (pending_.size() >= options_.max_pending_collectives) {
      pending_.pop_front();
      ++counters_.dropped_collectives;
    }
    pending_.push_back(a);
    auto it = history_.find(a.communicator);
    if (it == history_.end()) {
      if (history_.size() >= options_.max_communicators) continue;
      it = history_.emplace(a.communicator, std::deque<Seen>()).first;
    }
    std::deque<Seen>& seen = it->second;
    seen.push_back(Seen{a.sequence, a.enqueue_ns, a.op, a.bytes});
    // Flushes keep enqueue order within a communicator, but a straggling kernel may finish a
    // flush late: keep the history in sequence order.
    for (size_t i = seen.size() - 1; i > 0 && seen[i - 1].sequence > seen[i].sequence; --i)
      std::swap(seen[i - 1], seen[i]);
    if (seen.size() > history) seen.pop_front();
  }
  for (const MarkedStep& m : marks) {
    if (marks_.size() >= options_.max_pending_marks) {
      marks_.pop_front();
      ++counters_.dropped_marks;
    }
    marks_.push_back(m);
    last_mark_ns_ = now;
  }
  if (last_mark_ns_ > 0 && now - last_mark_ns_ > options_.marks_timeout_ns) last_mark_ns_ = 0;
  if (last_mark_ns_ > 0) {
    AddMarked(now, out);
  } else {
    AddInferred(now, out);
  }
}

void StepAssembler::Emit(int64_t step, TimeNs start, TimeNs end,
                         std::vector<common::StepSummary>* out) {
  common::StepSummary s;
  s.step = step;
  s.start_ns = start;
  s.end_ns = end;
  std::deque<common::CollectiveArrival> later;
  for (common::CollectiveArrival& a : pending_) {
    if (a.enqueue_ns >= end) {
      later.push_back(a);
    } else if (a.enqueue_ns >= start) {
      s.collectives.push_back(a);
    } else {
      ++counters_.dropped_collectives;  // between steps, or in one that was never handed on
    }
  }
  pending_.swap(later);
  std::sort(s.collectives.begin(), s.collectives.end(),
            [](const common::CollectiveArrival& a, const common::CollectiveArrival& b) {
              return a.enqueue_ns < b.enqueue_ns;
            });
  s.comm_kernel_ns = common::CommunicationKernelTime(s.collectives);
  ++counters_.steps;
  last_step_ = step;
  out->push_back(std::move(s));
}

void StepAssembler::AddMarked(TimeNs now, std::vector<common::StepSummary>* out) {
  std::stable_sort(marks_.begin(), marks_.end(),
                   [](const MarkedStep& a, const MarkedStep& b) { return a.end_ns < b.end_ns; });
  while (!marks_.empty() && marks_.front().end_ns + options_.hold_ns <= now) {
    const MarkedStep m = marks_.front();
    marks_.pop_front();
    Emit(m.step, m.start_ns, m.end_ns, out);
  }
}

std::optional<StepAssembler::Period> StepAssembler::InferPeriod(
    uint64_t communicator, const std::deque<Seen>& seen) const {
  // The newest run of consecutive sequence numbers (a dropped collective breaks the pattern).
  size_t first = seen.size();
  while (first > 0 &&
         (first == seen.size() || seen[first - 1].sequence + 1 == seen[first].sequence))
    --first;
  const size_t n = seen.size() - first;
  const auto sig_equal = [&](size_t i, size_t j) {
    return seen[i].op == seen[j].op && seen[i].bytes == seen[j].bytes;
  };
  for (int p = 1; p <= options_.max_period; ++p) {
    const auto period = static_cast<size_t>(p);
    const size_t window = std::max(static_cast<size_t>(options_.confirm_periods) * period,
                                   static_cast<size_t>(options_.min_window));
    if (window + period + 1 > n) break;
    const size_t begin = seen.size() - window;
    bool repeats = true;
    for (size_t i = begin; i < seen.size() && repeats; ++i) repeats = sig_equal(i, i - period);
    if (!repeats) continue;
    // Per phase (sequence modulo p), the shortest and longest pause before its collectives.
    std::vector<TimeNs> shortest(period, std::numeric_limits<TimeNs>::max()), longest(period, 0);
    bool positive = true;
    for (size_t i = begin; i < seen.size(); ++i) {
      const TimeNs gap = seen[i].enqueue_ns - seen[i - 1].enqueue_ns;
      positive = positive && gap > 0;
      const auto phase = static_cast<size_t>(seen[i].sequence % p);
      shortest[phase] = std::min(shortest[phase], gap);
      longest[phase] = std::max(longest[phase], gap);
    }
    if (!positive) continue;
    if (p == 1) {
      // Every collective a step: only when the pauses are steady.
      if (static_cast<double>(longest[0]) <=
          options_.pause_ratio * static_cast<double>(shortest[0])) {
        return Period{communicator, 1, 0};
      }
      continue;
    }
    size_t best = 0;
    for (size_t phase = 1; phase < period; ++phase) {
      if (shortest[phase] > shortest[best]) best = phase;
    }
    TimeNs others = 0;
    for (size_t phase = 0; phase < period; ++phase) {
      if (phase != best) others = std::max(others, longest[phase]);
    }
    if (static_cast<double>(shortest[best]) > options_.pause_ratio * static_cast<double>(others)) {
      return Period{communicator, p, static_cast<int64_t>(best)};
    }
  }
  return std::nullopt;
}

void StepAssembler::AddInferred(TimeNs now, std::vector<common::StepSummary>* out) {
  // The anchor: the communicator with the most history (ties: the smaller hash, the same on
  // every rank).
  const std::deque<Seen>* anchor = nullptr;
  uint64_t anchor_id = 0;
  for (const auto& [id, seen] : history_) {
    if (anchor == nullptr || seen.size() > anchor->size()) {
      anchor = &seen;
      anchor_id = id;
    }
  }
  if (anchor == nullptr) return;
  // A period that no longer explains the sequence stays until another does: a straggling rank
  // bends the pauses for a while without changing the loop.
  if (std::optional<Period> p = InferPeriod(anchor_id, *anchor); p.has_value()) period_ = p;
  if (!period_.has_value()) {
    while (pending_.size() > options_.max_pending_collectives / 2) {
      pending_.pop_front();
      ++counters_.dropped_collectives;
    }
    return;
  }
  const std::deque<Seen>& seen = history_[period_->communicator];
  // Step boundaries: the first collective of each period, in order.
  std::vector<std::pair<int64_t, TimeNs>> boundaries;  // step, enqueue
  for (const Seen& s : seen) {
    if (s.sequence < period_->phase || (s.sequence - period_->phase) % period_->collectives != 0)
      continue;
    boundaries.emplace_back((s.sequence - period_->phase) / period_->collectives, s.enqueue_ns);
  }
  for (size_t i = 0; i + 1 < boundaries.size(); ++i) {
    const auto [step, start] = boundaries[i];
    const auto [next, end] = boundaries[i + 1];
    if (next != step + 1 || step <= last_step_ || end + options_.hold_ns > now) continue;
    Emit(step, start, end, out);
  }
}

}  // namespace podscope::agent
