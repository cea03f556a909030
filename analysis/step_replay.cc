#include "analysis/step_replay.h"

#include <algorithm>
#include <climits>
#include <map>
#include <numeric>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "analysis/statistics.h"
#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::analysis {
namespace {

// Streams are told apart by (device, stream); a collective without a kernel row gets a stream of
// its communicator's own, apart from every device stream.
int64_t StreamKey(int32_t device, int32_t stream) {
  return (static_cast<int64_t>(device) << 32) | static_cast<uint32_t>(stream);
}
int64_t CollectiveStreamKey(common::NameId communicator) {
  return INT64_MIN + static_cast<int64_t>(communicator);
}

}  // namespace

StepReplay::StepReplay(const CommunicationReport& communication, Runs runs)
    : communication_(communication), runs_(runs) {
  // Each worker's collective rows, as matched across workers.
  collective_of_row_.resize(communication.wait.size());
  for (size_t w = 0; w < communication.wait.size(); ++w)
    collective_of_row_[w].assign(communication.wait[w].size(), -1);
  for (size_t c = 0; c < communication.collectives.size(); ++c) {
    for (const Participant& p : communication.collectives[c].participants) {
      collective_of_row_[p.worker][p.row] = static_cast<int32_t>(c);
    }
  }
  participants_.assign(communication.collectives.size(), 0);
  worker_begin_.push_back(0);
}

StepReplay::StepReplay(const common::CaptureView& capture, const std::vector<WorkerSteps>& steps,
                       const CommunicationReport& communication, Runs runs)
    : StepReplay(communication, runs) {
  for (size_t w = 0; w < capture.size(); ++w)
    AddWorker(capture.worker(w), w < steps.size() ? steps[w] : WorkerSteps{});
}

void StepReplay::AddWorker(const common::WorkerTrace& t, const WorkerSteps& steps) {
  const size_t w = step_numbers_.size();
  const size_t first = ops_.size();
  std::vector<int64_t>& numbers = step_numbers_.emplace_back();
  for (const StepSpan& s : steps.steps) numbers.push_back(s.number);
  static const std::vector<int32_t> kNoRows;
  static const std::vector<TimeNs> kNoWaits;
  const std::vector<int32_t>& collective_of_row =
      w < collective_of_row_.size() ? collective_of_row_[w] : kNoRows;
  const std::vector<TimeNs>& waits =
      w < communication_.wait.size() ? communication_.wait[w] : kNoWaits;
  struct Raw {
    TimeNs start, end;
    int64_t stream;
    int32_t step, collective;
    TimeNs wait;
    TimeNs launch;
    bool communication;
  };
  const LaunchTimes launches = FindLaunchTimes(t);
  std::vector<Raw> raw;
  raw.reserve(t.kernels.size() + t.memcpys.size());
  absl::flat_hash_map<int64_t, size_t> kernel_by_correlation;
  kernel_by_correlation.reserve(t.kernels.size());
  absl::flat_hash_map<TimeNs, size_t> communication_kernel_by_start;
  const common::KernelTable& k = t.kernels;
  for (size_t i = 0; i < k.size(); ++i) {
    const int32_t step = i < steps.kernel_step.size() ? steps.kernel_step[i] : -1;
    raw.push_back({k.start[i], std::max(k.start[i], k.end[i]), StreamKey(k.device[i], k.stream[i]),
                   step, -1, 0, launches.kernel[i],
                   k.kernel_class[i] == common::KernelClass::kCommunication});
    if (k.correlation[i] >= 0) kernel_by_correlation.emplace(k.correlation[i], i);
    if (k.kernel_class[i] == common::KernelClass::kCommunication)
      communication_kernel_by_start.emplace(k.start[i], i);
  }
  const common::MemcpyTable& m = t.memcpys;
  for (size_t i = 0; i < m.size(); ++i) {
    const int32_t step = i < steps.memcpy_step.size() ? steps.memcpy_step[i] : -1;
    raw.push_back({m.start[i], std::max(m.start[i], m.end[i]), StreamKey(m.device[i], m.stream[i]),
                   step, -1, 0, launches.memcpy[i], false});
  }
  // A participant is its kernel when the trace has it (same correlation id, or same start).
  const common::CollectiveTable& c = t.collectives;
  for (size_t row = 0; row < c.size(); ++row) {
    const int32_t collective = row < collective_of_row.size() ? collective_of_row[row] : -1;
    if (collective < 0) continue;
    ++participants_[collective];
    const TimeNs wait = waits[row];
    size_t kernel = SIZE_MAX;
    if (auto it = kernel_by_correlation.find(c.correlation[row]);
        c.correlation[row] >= 0 && it != kernel_by_correlation.end() &&
        k.start[it->second] == c.kernel_start[row]) {
      kernel = it->second;
    } else if (auto at = communication_kernel_by_start.find(c.kernel_start[row]);
               at != communication_kernel_by_start.end()) {
      kernel = at->second;
    }
    if (kernel != SIZE_MAX && raw[kernel].collective < 0) {
      raw[kernel].collective = collective;
      raw[kernel].wait = wait;
    } else {
      raw.push_back({c.kernel_start[row], std::max(c.kernel_start[row], c.kernel_end[row]),
                     CollectiveStreamKey(c.communicator[row]), -1, collective, wait, c.enqueue[row],
                     true});
    }
  }
  std::stable_sort(raw.begin(), raw.end(), [](const Raw& a, const Raw& b) {
    return a.start != b.start ? a.start < b.start : a.end < b.end;
  });

  // Dependencies: the stream's previous operation, and the operation on another stream that
  // ended last before this one started, when that one ended later (the stream sat idle for it).
  // A stream's operations by launch: in a real trace launch order within a stream is its
  // execution order, so they append to a sorted vector; the few that would not (a launch time
  // misread, or hostile input) go to an ordered set beside it, so no input costs more than a
  // logarithm per operation.
  struct ByLaunch {
    using Entry = std::pair<TimeNs, int32_t>;  // (launch, op)
    std::vector<Entry> in_order;
    absl::btree_set<Entry> out_of_order;
    void Add(Entry e) {
      if (in_order.empty() || in_order.back() <= e) {
        in_order.push_back(e);
      } else {
        out_of_order.insert(e);
      }
    }
    // The operation launched last at or before `launch` (ties: the latest added), or -1.
    int32_t LastAtOrBefore(TimeNs launch) const {
      const Entry key{launch, INT32_MAX};
      const Entry* best = nullptr;
      auto it = std::upper_bound(in_order.begin(), in_order.end(), key);
      if (it != in_order.begin()) best = &*std::prev(it);
      auto at = out_of_order.upper_bound(key);
      if (at != out_of_order.begin() && (best == nullptr || *best < *std::prev(at)))
        best = &*std::prev(at);
      return best == nullptr ? -1 : best->second;
    }
  };
  struct Stream {
    int64_t key;
    int32_t last;
    ByLaunch by_launch;
  };
  std::vector<Stream> streams;
  for (const Raw& r : raw) {
    Op op{r.start, r.end, -1, -1, -1, r.collective, r.step, r.wait};
    auto own = std::find_if(streams.begin(), streams.end(),
                            [&](const Stream& s) { return s.key == r.stream; });
    op.stream_pred = own == streams.end() ? -1 : own->last;
    TimeNs bound = op.stream_pred >= 0 ? ops_[op.stream_pred].end : INT64_MIN;
    TimeNs launched_before = INT64_MIN;
    for (const Stream& s : streams) {
      if (s.key == r.stream) continue;
      int32_t candidate = s.last;
      // The stream's last operation may still be running; the one before it has ended.
      if (candidate >= 0 && ops_[candidate].end > r.start) candidate = ops_[candidate].stream_pred;
      if (candidate >= 0 && ops_[candidate].end <= r.start && ops_[candidate].end > bound) {
        bound = ops_[candidate].end;
        op.cross_pred = candidate;
      }
      // A communication kernel also waits for the work its process enqueued on other streams
      // before launching it (NCCL makes its stream wait for the caller's): the operation launched
      // last before it. When its own stream was busy the trace hides that wait, and a replay
      // that moved the stream earlier would start it before its data was ready.
      if (!r.communication) continue;
      const int32_t before = s.by_launch.LastAtOrBefore(r.launch);
      if (before < 0) continue;
      if (ops_[before].end <= r.start && ops_[before].end > launched_before) {
        launched_before = ops_[before].end;
        op.launch_pred = before;
      }
    }
    const int32_t index = static_cast<int32_t>(ops_.size());
    ops_.push_back(op);
    if (own == streams.end()) {
      streams.push_back({r.stream, index, {}});
      own = std::prev(streams.end());
    } else {
      own->last = index;
    }
    own->by_launch.Add({r.launch, index});
  }
  if (runs_ == Runs::kMerged) MergeRuns(first);
  worker_begin_.push_back(static_cast<uint32_t>(ops_.size()));
}

// An operation joins the run before it on its stream when the replay must shift it exactly as
// that run's end: it follows only its stream predecessor, which is no collective (a collective
// ends at the replayed last arrival, not at its own start's shift), ends no earlier than that
// predecessor (so the run's end is its last operation's), lies in the same step (the loss reads
// step spans), and nothing else waits for the predecessor (its end is no longer kept apart).
void StepReplay::MergeRuns(size_t first) {
  const size_t n = ops_.size() - first;
  std::vector<uint8_t> waited_on(n, 0);  // a cross-stream or launch predecessor of some operation
  for (size_t i = first; i < ops_.size(); ++i) {
    for (int32_t p : {ops_[i].cross_pred, ops_[i].launch_pred})
      if (p >= 0) waited_on[p - first] = 1;
  }
  std::vector<int32_t> merged_into(n);  // old index (from first) -> new index (absolute)
  size_t kept = first;
  auto remap = [&](int32_t p) { return p < 0 ? p : merged_into[p - first]; };
  for (size_t i = first; i < ops_.size(); ++i) {
    const Op op = ops_[i];
    const int32_t pred = op.stream_pred;
    if (op.collective < 0 && op.cross_pred < 0 && op.launch_pred < 0 && pred >= 0 &&
        !waited_on[pred - first]) {
      Op& run = ops_[merged_into[pred - first]];
      if (run.collective < 0 && run.step == op.step && op.end >= run.end) {
        run.end = op.end;
        merged_into[i - first] = merged_into[pred - first];
        continue;
      }
    }
    Op& out = ops_[kept];
    out = op;
    out.stream_pred = remap(op.stream_pred);
    out.cross_pred = remap(op.cross_pred);
    out.launch_pred = remap(op.launch_pred);
    merged_into[i - first] = static_cast<int32_t>(kept++);
  }
  ops_.resize(kept);  // the capacity stays for the next worker's operations
}

absl::StatusOr<StepReplay::Replayed> StepReplay::Replay(
    const std::vector<uint32_t>& excused) const {
  const size_t workers = worker_begin_.size() - 1;
  std::vector<uint8_t> is_excused(workers, 0);
  for (uint32_t w : excused) {
    if (w < workers) is_excused[w] = 1;
  }
  Replayed out;
  out.start_shift.assign(ops_.size(), 0);
  out.end_shift.assign(ops_.size(), 0);
  // Per collective: participants still to arrive, and the latest (shift - wait) among those
  // who hold the others and among all of them.
  std::vector<uint32_t> remaining(participants_.begin(), participants_.end());
  std::vector<TimeNs> held(participants_.size(), INT64_MIN), any(participants_.size(), INT64_MIN);
  std::vector<std::vector<uint32_t>> blocked_on(participants_.size());
  auto end_shift = [&](int32_t i) {
    const Op& op = ops_[i];
    if (op.collective < 0) return out.start_shift[i];
    const TimeNs last = held[op.collective] != INT64_MIN ? held[op.collective] : any[op.collective];
    // Done at the replayed last arrival plus its transfer, and never before its own arrival plus
    // it.
    return std::max(last, out.start_shift[i] - op.wait);
  };

  // Each worker runs down its operations until one needs a collective not everyone reached.
  std::vector<uint32_t> cursor(worker_begin_.begin(), worker_begin_.end() - 1);
  std::vector<uint32_t> ready(workers);
  std::iota(ready.begin(), ready.end(), 0u);
  while (!ready.empty()) {
    const uint32_t w = ready.back();
    ready.pop_back();
    for (uint32_t& i = cursor[w]; i < worker_begin_[w + 1]; ++i) {
      const Op& op = ops_[i];
      int32_t waits_for = -1;
      for (int32_t p : {op.stream_pred, op.cross_pred, op.launch_pred}) {
        if (p >= 0 && ops_[p].collective >= 0 && remaining[ops_[p].collective] > 0)
          waits_for = ops_[p].collective;
      }
      if (waits_for >= 0) {
        blocked_on[waits_for].push_back(w);
        break;
      }
      TimeNs captured = INT64_MIN, replayed = INT64_MIN;
      for (int32_t p : {op.stream_pred, op.cross_pred, op.launch_pred}) {
        if (p < 0) continue;
        captured = std::max(captured, ops_[p].end);
        replayed = std::max(replayed, ops_[p].end + end_shift(p));
      }
      out.start_shift[i] = captured == INT64_MIN ? 0 : replayed - captured;
      if (op.collective >= 0) {
        const int32_t c = op.collective;
        const TimeNs term = out.start_shift[i] - op.wait;
        any[c] = std::max(any[c], term);
        if (!is_excused[w]) held[c] = std::max(held[c], term);
        if (--remaining[c] == 0) {
          ready.insert(ready.end(), blocked_on[c].begin(), blocked_on[c].end());
          std::vector<uint32_t>().swap(blocked_on[c]);
        }
      }
    }
  }
  for (size_t w = 0; w < workers; ++w) {
    if (cursor[w] != worker_begin_[w + 1]) {
      return absl::FailedPreconditionError(common::StrCat(
          "the step-time replay found no order for worker ", w,
          "'s operations: its collectives and another worker's are matched inconsistently"));
    }
  }
  for (size_t i = 0; i < ops_.size(); ++i) out.end_shift[i] = end_shift(static_cast<int32_t>(i));
  return out;
}

absl::StatusOr<StepTimeLoss> StepReplay::LossOf(const std::vector<uint32_t>& excused) const {
  ASSIGN_OR_RETURN(const Replayed replayed, Replay(excused));
  // Per step number: every worker's step span, as captured and as replayed.
  std::map<int64_t, std::pair<std::vector<TimeNs>, std::vector<TimeNs>>> spans;
  for (size_t w = 0; w + 1 < worker_begin_.size(); ++w) {
    const size_t n = step_numbers_[w].size();
    struct Span {
      TimeNs start = INT64_MAX, end = INT64_MIN, replayed_start = INT64_MAX,
             replayed_end = INT64_MIN;
    };
    std::vector<Span> span(n);
    for (uint32_t i = worker_begin_[w]; i < worker_begin_[w + 1]; ++i) {
      const Op& op = ops_[i];
      if (op.step < 0 || static_cast<size_t>(op.step) >= n) continue;
      Span& s = span[op.step];
      s.start = std::min(s.start, op.start);
      s.end = std::max(s.end, op.end);
      s.replayed_start = std::min(s.replayed_start, op.start + replayed.start_shift[i]);
      s.replayed_end = std::max(s.replayed_end, op.end + replayed.end_shift[i]);
    }
    for (size_t s = 0; s < n; ++s) {
      if (span[s].end < span[s].start) continue;  // no device work in that step
      auto& [captured, replay] = spans[step_numbers_[w][s]];
      captured.push_back(span[s].end - span[s].start);
      replay.push_back(span[s].replayed_end - span[s].replayed_start);
    }
  }
  StepTimeLoss loss;
  for (auto& [number, both] : spans) {
    const TimeNs lost = Median(std::move(both.first)) - Median(std::move(both.second));
    loss.steps.push_back({number, lost});
    loss.loss_ns += lost;
  }
  return loss;
}

}  // namespace podscope::analysis
