// Hand-made watch data for the watch tests.
#pragma once

#include <initializer_list>
#include <vector>

#include "common/watch_summary.h"

namespace podscope::coordinator::watch::testing {

using common::TimeNs;
constexpr TimeNs kMs = 1'000'000;

struct Arrive {
  int64_t sequence;
  TimeNs start_ms;
  TimeNs end_ms;
};

// Rank `rank`'s step `step` over [start, end] ms with AllReduces on communicator 7 of `nranks`.
inline common::StepSummary Step(int32_t rank, int64_t step, TimeNs start_ms, TimeNs end_ms,
                                std::initializer_list<Arrive> collectives, int32_t nranks = 3,
                                int64_t bytes = 1'000'000) {
  common::StepSummary s;
  s.rank = rank;
  s.step = step;
  s.start_ns = start_ms * kMs;
  s.end_ns = end_ms * kMs;
  for (const Arrive& a : collectives) {
    common::CollectiveArrival c;
    c.communicator = 7;
    c.sequence = a.sequence;
    c.op = common::CollectiveOp::kAllReduce;
    c.nranks = nranks;
    c.bytes = bytes;
    c.enqueue_ns = a.start_ms * kMs - 1;
    c.start_ns = a.start_ms * kMs;
    c.end_ns = a.end_ms * kMs;
    s.collectives.push_back(c);
  }
  return s;
}

}  // namespace podscope::coordinator::watch::testing
