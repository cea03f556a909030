#include "common/watch_wire.h"

#include "common/str_util.h"

namespace podscope::common {
namespace {

constexpr uint32_t kMaxOp = static_cast<uint32_t>(CollectiveOp::kBarrier);

}  // namespace

uint32_t WatchBatchBuilder::JobIndex(std::string_view job) {
  auto it = jobs_.find(job);
  if (it != jobs_.end()) return it->second;
  const auto index = static_cast<uint32_t>(batch_.jobs_size());
  batch_.add_jobs(std::string(job));
  jobs_.emplace(std::string(job), index);
  return index;
}

uint32_t WatchBatchBuilder::CommunicatorIndex(uint64_t communicator) {
  auto [it, inserted] =
      communicators_.try_emplace(communicator, static_cast<uint32_t>(batch_.communicators_size()));
  if (inserted) batch_.add_communicators(communicator);
  return it->second;
}

void WatchBatchBuilder::Add(std::string_view job, const StepSummary& s) {
  v1::WatchStep* w = batch_.add_steps();
  w->set_job(JobIndex(job));
  w->set_rank(s.rank);
  w->set_step(s.step);
  w->set_start_ns(s.start_ns);
  w->set_duration_ns(s.end_ns - s.start_ns);
  w->set_comm_kernel_ns(s.comm_kernel_ns);
  for (const CollectiveArrival& a : s.collectives) {
    v1::WatchCollective* c = w->add_collectives();
    c->set_communicator(CommunicatorIndex(a.communicator));
    c->set_sequence(a.sequence);
    c->set_op(static_cast<uint32_t>(a.op));
    c->set_nranks(a.nranks);
    c->set_bytes(a.bytes);
    c->set_enqueue_delta_ns(a.enqueue_ns - s.start_ns);
    c->set_start_delta_ns(a.start_ns - s.start_ns);
    c->set_end_delta_ns(a.end_ns - s.start_ns);
  }
}

void WatchBatchBuilder::Add(std::string_view job, const RankProgress& p) {
  v1::WatchProgress* w = batch_.add_progress();
  w->set_job(JobIndex(job));
  w->set_rank(p.rank);
  w->set_communicator(CommunicatorIndex(p.communicator));
  w->set_nranks(p.nranks);
  w->set_entered_sequence(p.entered_sequence);
  w->set_entered_ns(p.entered_ns);
  w->set_entered_op(static_cast<uint32_t>(p.entered_op));
  w->set_entered_bytes(p.entered_bytes);
  w->set_completed_sequence(p.completed_sequence);
  w->set_completed_ns(p.completed_ns);
}

v1::WatchBatch WatchBatchBuilder::Take() {
  v1::WatchBatch out = std::move(batch_);
  batch_.Clear();
  jobs_.clear();
  communicators_.clear();
  return out;
}

absl::StatusOr<DecodedWatch> DecodeWatchBatch(const v1::WatchBatch& b,
                                              const WatchWireLimits& limits) {
  auto bad = [](auto... why) {
    return absl::InvalidArgumentError(StrCat("watch batch: ", why...));
  };
  if (static_cast<size_t>(b.steps_size()) > limits.max_steps)
    return bad("more than ", limits.max_steps, " steps");
  if (static_cast<size_t>(b.progress_size()) > limits.max_progress) {
    return bad("more than ", limits.max_progress, " progress records");
  }
  if (static_cast<size_t>(b.jobs_size()) > limits.max_jobs)
    return bad("more than ", limits.max_jobs, " jobs");
  if (static_cast<size_t>(b.communicators_size()) > limits.max_communicators) {
    return bad("more than ", limits.max_communicators, " communicators");
  }
  for (const std::string& job : b.jobs()) {
    if (job.empty() || job.size() > limits.max_job_bytes)
      return bad("a job name is empty or longer than ", limits.max_job_bytes, " bytes");
  }
  const auto jobs = static_cast<uint32_t>(b.jobs_size());
  const auto communicators = static_cast<uint32_t>(b.communicators_size());
  DecodedWatch out;
  out.dropped_steps = b.dropped_steps();
  out.steps.reserve(static_cast<size_t>(b.steps_size()));
  for (const v1::WatchStep& w : b.steps()) {
    if (w.job() >= jobs)
      return bad("step ", w.step(), " of rank ", w.rank(), " names job #", w.job(), " of ", jobs);
    if (static_cast<size_t>(w.collectives_size()) > limits.max_collectives_per_step) {
      return bad("step ", w.step(), " of rank ", w.rank(), " has more than ",
                 limits.max_collectives_per_step, " collectives");
    }
    if (w.start_ns() < 0 || w.start_ns() > kMaxWatchTimeNs)
      return bad("step ", w.step(), " of rank ", w.rank(), " starts outside [0, 2^62) ns");
    if (w.duration_ns() < 0 || w.duration_ns() > kMaxWatchSpanNs)
      return bad("step ", w.step(), " of rank ", w.rank(), " lasts less than 0 or more than a day");
    StepSummary s;
    s.rank = w.rank();
    s.step = w.step();
    s.start_ns = w.start_ns();
    s.end_ns = w.start_ns() + w.duration_ns();
    s.comm_kernel_ns = w.comm_kernel_ns();
    for (const v1::WatchCollective& c : w.collectives()) {
      if (c.communicator() >= communicators)
        return bad("a collective names communicator #", c.communicator(), " of ", communicators);
      if (c.op() > kMaxOp) return bad("collective ", c.sequence(), " has op ", c.op());
      for (const int64_t delta : {c.enqueue_delta_ns(), c.start_delta_ns(), c.end_delta_ns()}) {
        if (delta < -kMaxWatchSpanNs || delta > kMaxWatchSpanNs)
          return bad("collective ", c.sequence(), " lies more than a day from its step");
      }
      CollectiveArrival a;
      a.communicator = b.communicators(static_cast<int>(c.communicator()));
      a.sequence = c.sequence();
      a.op = static_cast<CollectiveOp>(c.op());
      a.nranks = c.nranks();
      a.bytes = c.bytes();
      a.enqueue_ns = s.start_ns + c.enqueue_delta_ns();
      a.start_ns = s.start_ns + c.start_delta_ns();
      a.end_ns = s.start_ns + c.end_delta_ns();
      s.collectives.push_back(a);
    }
    out.steps.emplace_back(b.jobs(static_cast<int>(w.job())), std::move(s));
  }
  for (const v1::WatchProgress& w : b.progress()) {
    if (w.job() >= jobs)
      return bad("progress of rank ", w.rank(), " names job #", w.job(), " of ", jobs);
    if (w.communicator() >= communicators)
      return bad("progress of rank ", w.rank(), " names communicator #", w.communicator());
    if (w.entered_op() > kMaxOp)
      return bad("progress of rank ", w.rank(), " has op ", w.entered_op());
    for (const int64_t t : {w.entered_ns(), w.completed_ns()}) {
      if (t < 0 || t > kMaxWatchTimeNs)
        return bad("progress of rank ", w.rank(), " has a time outside [0, 2^62) ns");
    }
    RankProgress p;
    p.rank = w.rank();
    p.communicator = b.communicators(static_cast<int>(w.communicator()));
    p.nranks = w.nranks();
    p.entered_sequence = w.entered_sequence();
    p.entered_ns = w.entered_ns();
    p.entered_op = static_cast<CollectiveOp>(w.entered_op());
    p.entered_bytes = w.entered_bytes();
    p.completed_sequence = w.completed_sequence();
    p.completed_ns = w.completed_ns();
    out.progress.emplace_back(b.jobs(static_cast<int>(w.job())), p);
  }
  return out;
}

void AlignWatch(const ClockModel& model, DecodedWatch* data) {
  for (auto& [job, step] : data->steps) {
    step.start_ns = model.ToAligned(step.start_ns);
    step.end_ns = model.ToAligned(step.end_ns);
    for (CollectiveArrival& c : step.collectives) {
      c.enqueue_ns = model.ToAligned(c.enqueue_ns);
      c.start_ns = model.ToAligned(c.start_ns);
      c.end_ns = model.ToAligned(c.end_ns);
    }
  }
  for (auto& [job, p] : data->progress) {
    if (p.entered_sequence >= 0) p.entered_ns = model.ToAligned(p.entered_ns);
    if (p.completed_sequence >= 0) p.completed_ns = model.ToAligned(p.completed_ns);
  }
}

}  // namespace podscope::common
