#include "analysis/cast_copies.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace podscope::analysis {
namespace {

// Spans of one name on each thread, by start, with the latest end reached so far: whether one
// holds an instant is one binary search.
class SpansByThread {
 public:
  void Add(int64_t thread, Interval span) { threads_[thread].spans.push_back(span); }

  void Finish() {
    for (auto& [thread, t] : threads_) {
      std::sort(t.spans.begin(), t.spans.end(),
                [](const Interval& a, const Interval& b) { return a.start < b.start; });
      t.reach.resize(t.spans.size());
      TimeNs reach = INT64_MIN;
      for (size_t i = 0; i < t.spans.size(); ++i)
        t.reach[i] = reach = std::max(reach, t.spans[i].end);
    }
  }

  // The latest-starting span holding `at` on `thread`, or nullptr.
  const Interval* Holding(int64_t thread, TimeNs at) const {
    auto found = threads_.find(thread);
    if (found == threads_.end()) return nullptr;
    const Thread& t = found->second;
    auto it = std::upper_bound(t.spans.begin(), t.spans.end(), at,
                               [](TimeNs v, const Interval& a) { return v < a.start; });
    for (size_t i = static_cast<size_t>(it - t.spans.begin()); i-- > 0;) {
      if (t.reach[i] <= at) return nullptr;
      if (t.spans[i].end > at) return &t.spans[i];
    }
    return nullptr;
  }

  bool empty() const { return threads_.empty(); }

 private:
  struct Thread {
    std::vector<Interval> spans;
    std::vector<TimeNs> reach;
  };
  std::map<int64_t, Thread> threads_;
};

}  // namespace

CastCopies ComputeWorkerCastCopies(const common::WorkerTrace& trace) {
  CastCopies out;
  const common::KernelTable& k = trace.kernels;
  for (size_t i = 0; i < k.size(); ++i) out.kernel_ns += std::max<TimeNs>(0, k.end[i] - k.start[i]);
  const common::HostSpanTable& h = trace.host_spans;
  SpansByThread to_copy, copy;
  for (size_t i = 0; i < h.size(); ++i) {
    if (h.category[i] == common::HostSpanCategory::kOp) ++out.operators;
    const std::string_view name = trace.strings.Get(h.name[i]);
    if (name == "aten::_to_copy") to_copy.Add(h.thread[i], {h.start[i], h.end[i]});
    if (name == "aten::copy_") copy.Add(h.thread[i], {h.start[i], h.end[i]});
  }
  if (to_copy.empty() || copy.empty()) return out;
  to_copy.Finish();
  copy.Finish();
  // The launches made inside a copy_ that is inside a _to_copy on the same thread.
  std::unordered_map<int64_t, const Interval*> cast_of;  // launch correlation -> its copy_
  const common::RuntimeCallTable& r = trace.runtime_calls;
  for (size_t i = 0; i < r.size(); ++i) {
    const Interval* c = copy.Holding(r.thread[i], r.start[i]);
    if (c == nullptr || to_copy.Holding(r.thread[i], c->start) == nullptr) continue;
    cast_of.emplace(r.correlation[i], c);
  }
  std::unordered_set<const Interval*> casts;
  for (size_t i = 0; i < k.size(); ++i) {
    auto it = cast_of.find(k.correlation[i]);
    if (it == cast_of.end()) continue;
    out.cast_kernel_ns += std::max<TimeNs>(0, k.end[i] - k.start[i]);
    casts.insert(it->second);
  }
  out.casts = casts.size();
  return out;
}

}  // namespace podscope::analysis
