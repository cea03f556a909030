#include "agent/watch/probe_watch.h"

#include "common/watch_wire.h"

namespace podscope::agent {

namespace {

bool Instant(int64_t t) { return t >= 0 && t < common::kMaxWatchTimeNs; }

// A span from `start` to `end` within the wire's bound on spans.
bool Span(int64_t start, int64_t end) {
  return Instant(start) && Instant(end) && end >= start && end - start <= common::kMaxWatchSpanNs;
}

bool Op(uint32_t op) { return op < static_cast<uint32_t>(common::kCollectiveOpCount); }

}  // namespace

ProbeWatchData DecodeProbeWatch(const v1::ProbeWatch& watch, const ProbeWatchLimits& limits) {
  ProbeWatchData out;
  out.now_ns = Instant(watch.now_ns()) ? watch.now_ns() : 0;
  out.probe_dropped = watch.dropped();
  for (const v1::ProbeWatchCollective& c : watch.collectives()) {
    if (out.collectives.size() >= limits.max_collectives || !Op(c.op()) || c.sequence() < 0 ||
        c.nranks() < 1 || c.nranks() > limits.max_nranks || c.bytes() < 0 ||
        !Span(c.enqueue_ns(), c.end_ns()) || !Span(c.start_ns(), c.end_ns())) {
      ++out.refused;
      continue;
    }
    common::CollectiveArrival& a = out.collectives.emplace_back();
    a.communicator = c.communicator();
    a.sequence = c.sequence();
    a.op = static_cast<common::CollectiveOp>(c.op());
    a.nranks = c.nranks();
    a.bytes = c.bytes();
    a.enqueue_ns = c.enqueue_ns();
    a.start_ns = c.start_ns();
    a.end_ns = c.end_ns();
  }
  for (const v1::ProbeWatchStep& s : watch.steps()) {
    if (out.steps.size() >= limits.max_steps || s.step() < 0 || !Span(s.start_ns(), s.end_ns())) {
      ++out.refused;
      continue;
    }
    out.steps.push_back(MarkedStep{s.step(), s.start_ns(), s.end_ns()});
  }
  for (const v1::ProbeWatchProgress& p : watch.progress()) {
    if (out.progress.size() >= limits.max_progress || !Op(p.entered_op()) || p.nranks() < 1 ||
        p.nranks() > limits.max_nranks || p.entered_sequence() < -1 ||
        p.completed_sequence() < -1 || !Instant(p.entered_ns()) || !Instant(p.completed_ns()) ||
        p.entered_bytes() < 0) {
      ++out.refused;
      continue;
    }
    common::RankProgress& r = out.progress.emplace_back();
    r.rank = -1;
    r.communicator = p.communicator();
    r.nranks = p.nranks();
    r.entered_sequence = p.entered_sequence();
    r.entered_ns = p.entered_ns();
    r.entered_op = static_cast<common::CollectiveOp>(p.entered_op());
    r.entered_bytes = p.entered_bytes();
    r.completed_sequence = p.completed_sequence();
    r.completed_ns = p.completed_ns();
  }
  return out;
}

}  // namespace podscope::agent
