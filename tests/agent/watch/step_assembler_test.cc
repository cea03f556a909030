// One probed rank's watch data made into steps: from the process's marks, and inferred from the
// period of its collectives, on hand-made data and on the workload model's.
#include "agent/watch/step_assembler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "agent/watch/probe_watch.h"
#include "sim/workload_model.h"

namespace podscope::agent {
namespace {

using common::CollectiveArrival;
using common::CollectiveOp;
using common::StepSummary;

constexpr TimeNs kMs = 1'000'000;
constexpr TimeNs kS = 1'000'000'000;

CollectiveArrival Coll(uint64_t comm, int64_t seq, TimeNs enqueue, int64_t bytes = 1024,
                       CollectiveOp op = CollectiveOp::kAllReduce) {
  CollectiveArrival a;
  a.communicator = comm;
  a.sequence = seq;
  a.op = op;
  a.nranks = 4;
  a.bytes = bytes;
  a.enqueue_ns = enqueue;
  a.start_ns = enqueue + 1 * kMs;
  a.end_ns = enqueue + 3 * kMs;
  return a;
}

TEST(StepAssemblerTest, MarkedStepsTakeTheCollectivesLaunchedInsideThemOnceTheHoldHasPassed) {
  StepAssembler a;
  std::vector<StepSummary> out;
  // Step 7 from 100 ms to 200 ms with two collectives; one more before it, one after.
  a.Add({Coll(1, 0, 90 * kMs), Coll(1, 1, 120 * kMs), Coll(2, 0, 150 * kMs), Coll(1, 2, 210 * kMs)},
        {MarkedStep{7, 100 * kMs, 200 * kMs}}, 500 * kMs, &out);
  EXPECT_TRUE(out.empty()) << "held until a second past its end: a late collective may still come";
  EXPECT_TRUE(a.marking());
  a.Add({}, {}, 200 * kMs + kS, &out);
  ASSERT_EQ(out.size(), 1u);
  const StepSummary& s = out[0];
  EXPECT_EQ(s.step, 7);
  EXPECT_EQ(s.start_ns, 100 * kMs);
  EXPECT_EQ(s.end_ns, 200 * kMs);
  ASSERT_EQ(s.collectives.size(), 2u);
  EXPECT_EQ(s.collectives[0].sequence, 1);
  EXPECT_EQ(s.collectives[1].communicator, 2u);
  // Two kernels of 2 ms, apart: 4 ms of communication.
  EXPECT_EQ(s.comm_kernel_ns, 4 * kMs);
  EXPECT_EQ(a.counters().dropped_collectives, 1u) << "the one before the step belongs to none";
  EXPECT_FALSE(a.period().has_value()) << "marks, not inference";
}

// Four equal AllReduces per step on communicator 9: 30 ms of pause before the first (forward
// pass), 5 ms between the others. Sequence numbers start at 2 (two warm-up collectives).
std::vector<CollectiveArrival> FourBucketSteps(int steps, TimeNs t0) {
  std::vector<CollectiveArrival> out;
  TimeNs t = t0;
  int64_t seq = 2;
  for (int s = 0; s < steps; ++s) {
    for (int b = 0; b < 4; ++b) {
      t += b == 0 ? 30 * kMs : 5 * kMs;
      out.push_back(Coll(9, seq++, t));
    }
  }
  return out;
}

TEST(StepAssemblerTest, WithoutMarksStepsAreInferredFromThePeriodAndNumberedBySequence) {
  StepAssembler a;
  std::vector<StepSummary> out;
  const std::vector<CollectiveArrival> all = FourBucketSteps(20, 1'000 * kMs);
  a.Add(all, {}, all.back().enqueue_ns + 2 * kS, &out);
  ASSERT_TRUE(a.period().has_value());
  EXPECT_EQ(a.period()->communicator, 9u);
  EXPECT_EQ(a.period()->collectives, 4)
      << "equal collectives: the pauses give the period, not the signature";
  EXPECT_EQ(a.period()->phase, 2) << "sequence 2, 6, 10, ... begin steps";
  // Steps 0..18 are whole (19 has no next boundary yet); each is 45 ms with its 4 collectives.
  ASSERT_EQ(out.size(), 19u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].step, static_cast<int64_t>(i));
    EXPECT_EQ(out[i].end_ns - out[i].start_ns, 45 * kMs);
    ASSERT_EQ(out[i].collectives.size(), 4u);
    EXPECT_EQ(out[i].collectives[0].sequence, 2 + 4 * static_cast<int64_t>(i));
  }
  // The next flush hands on step 19 once step 20 begins, and nothing twice.
  std::vector<StepSummary> more;
  const TimeNs next = all.back().enqueue_ns + 30 * kMs;
  a.Add({Coll(9, 82, next)}, {}, next + 2 * kS, &more);
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].step, 19);
}

TEST(StepAssemblerTest, ARepeatingSignatureAndTheLongerPauseBeforeItsFirstGiveThePeriod) {
  // AllGather 1 KiB, AllGather 1 KiB, ReduceScatter 4 KiB: every 10 ms, period 3.
  StepAssembler a;
  std::vector<CollectiveArrival> all;
  for (int64_t seq = 0; seq < 60; ++seq) {
    const bool rs = seq % 3 == 2;
    all.push_back(Coll(5, seq, seq * 10 * kMs + (seq % 3 == 0 ? 3 * kMs : 0), rs ? 4096 : 1024,
                       rs ? CollectiveOp::kReduceScatter : CollectiveOp::kAllGather));
  }
  std::vector<StepSummary> out;
  a.Add(all, {}, 10 * kS, &out);
  ASSERT_TRUE(a.period().has_value());
  EXPECT_EQ(a.period()->collectives, 3);
  EXPECT_EQ(a.period()->phase, 0);
  EXPECT_EQ(out.size(), 19u);
}

TEST(StepAssemblerTest, NoRegularityMeansNoStepsAndABoundedBacklog) {
  StepAssemblerOptions o;
  o.max_pending_collectives = 100;
  StepAssembler a(o);
  std::vector<StepSummary> out;
  std::vector<CollectiveArrival> all;
  TimeNs t = 0;
  std::mt19937 random(5);
  for (int64_t seq = 0; seq < 500; ++seq) {
    t += static_cast<TimeNs>(random() % 13 + 1) * kMs;  // pauses and sizes with no period
    all.push_back(Coll(1, seq, t, 1024 + static_cast<int64_t>(random() % 5)));
  }
  a.Add(all, {}, t + 5 * kS, &out);
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(a.period().has_value());
  EXPECT_GE(a.counters().dropped_collectives, 400u);
}

// The workload model's data-parallel job: what a probe would flush each second, on each rank.
TEST(StepAssemblerTest, InferredStepsMatchTheWorkloadModelsStepsOnEveryRank) {
  sim::WorkloadOptions o;
  o.ranks = 4;
  o.steps = 30;
  o.seed = 7;
  o.first_step = 100;
  const sim::Workload w = sim::SimulateJob(o);
  for (const common::WorkerTrace& worker : w.capture.workers) {
    // The probe's records of this rank: its collectives as the agent's summaries carry them.
    std::vector<CollectiveArrival> all;
    for (const StepSummary& s : common::SummarizeSteps(worker))
      all.insert(all.end(), s.collectives.begin(), s.collectives.end());
    std::sort(all.begin(), all.end(),
              [](const auto& x, const auto& y) { return x.enqueue_ns < y.enqueue_ns; });
    ASSERT_FALSE(all.empty());
    // Flushed once a second of the rank's clock.
    StepAssembler a;
    std::vector<StepSummary> out;
    size_t next = 0;
    for (TimeNs flush = all.front().enqueue_ns + kS;; flush += kS) {
      std::vector<CollectiveArrival> batch;
      while (next < all.size() && all[next].end_ns <= flush) batch.push_back(all[next++]);
      a.Add(batch, {}, flush, &out);
      if (next == all.size() && flush > all.back().end_ns + 2 * kS) break;
    }
    ASSERT_TRUE(a.period().has_value());
    EXPECT_EQ(a.period()->collectives, o.buckets);
    // The true steps, by number.
    std::map<int64_t, TimeNs> truth;
    for (size_t i = 0; i < worker.steps.size(); ++i)
      truth[worker.steps.number[i]] = worker.steps.end[i] - worker.steps.start[i];
    ASSERT_GE(out.size(), static_cast<size_t>(o.steps) - 6) << "rank " << worker.info.rank;
    double inferred_total = 0, true_total = 0;
    for (const StepSummary& s : out) {
      ASSERT_TRUE(truth.contains(s.step))
          << "inferred step " << s.step << " is no step of the model";
      EXPECT_EQ(s.collectives.size(), static_cast<size_t>(o.buckets));
      // Each bucket's kernel inside the step's communication time.
      EXPECT_GT(s.comm_kernel_ns, 0);
      inferred_total += static_cast<double>(s.end_ns - s.start_ns);
      true_total += static_cast<double>(truth[s.step]);
    }
    // Shifted boundaries, the same lengths: the totals agree within the jitter of one step.
    EXPECT_NEAR(inferred_total / true_total, 1.0, 0.02) << "rank " << worker.info.rank;
  }
}

TEST(ProbeWatchTest, RecordsThatBreakABoundAreDroppedAndCountedAndTheRestKept) {
  v1::ProbeWatch m;
  m.set_now_ns(5 * kS);
  m.set_dropped(3);
  auto add = [&](int64_t seq, int64_t enqueue, int64_t start, int64_t end, uint32_t op = 1,
                 int32_t nranks = 4) {
    v1::ProbeWatchCollective* c = m.add_collectives();
    c->set_communicator(1);
    c->set_sequence(seq);
    c->set_op(op);
    c->set_nranks(nranks);
    c->set_bytes(8);
    c->set_enqueue_ns(enqueue);
    c->set_start_ns(start);
    c->set_end_ns(end);
  };
  add(0, kS, kS + 10, kS + 20);      // fine
  add(1, kS, kS + 30, kS + 20);      // ends before it starts
  add(2, -5, kS, kS + 1);            // before 1970
  add(3, kS, kS, int64_t{1} << 62);  // past 2^62, and days long
  add(4, kS, kS, kS + 1, 200);       // no such op
  add(5, kS, kS, kS + 1, 1, 0);      // nobody in the communicator
  add(-1, kS, kS, kS + 1);           // no sequence
  v1::ProbeWatchStep* good = m.add_steps();
  good->set_step(3);
  good->set_start_ns(kS);
  good->set_end_ns(2 * kS);
  v1::ProbeWatchStep* bad = m.add_steps();
  bad->set_step(4);
  bad->set_start_ns(2 * kS);
  bad->set_end_ns(kS);
  v1::ProbeWatchProgress* p = m.add_progress();
  p->set_communicator(1);
  p->set_nranks(4);
  p->set_entered_sequence(-7);
  const ProbeWatchData d = DecodeProbeWatch(m);
  EXPECT_EQ(d.now_ns, 5 * kS);
  EXPECT_EQ(d.probe_dropped, 3u);
  ASSERT_EQ(d.collectives.size(), 1u);
  EXPECT_EQ(d.collectives[0].sequence, 0);
  ASSERT_EQ(d.steps.size(), 1u);
  EXPECT_EQ(d.steps[0].step, 3);
  EXPECT_TRUE(d.progress.empty());
  EXPECT_EQ(d.refused, 6u + 1u + 1u);
}

}  // namespace
}  // namespace podscope::agent
