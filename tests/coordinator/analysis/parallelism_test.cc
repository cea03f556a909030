#include "coordinator/analysis/parallelism.h"

#include <gtest/gtest.h>

#include "tests/coordinator/analysis/hand_trace.h"

namespace podscope::coordinator::analysis {
namespace {

using common::CollectiveOp;

constexpr const char* kBackward = "autograd::engine::evaluate_function: MmBackward0";

// One call of `op` on communicator `name` in step 1 (host span [0, 10'000)), enqueued at `at`;
// the step's backward pass starts at 5'000 when `backward` is set.
struct Call {
  CollectiveOp op;
  common::TimeNs at;
  int64_t bytes;
  std::string name = "pg:1";
};

common::WorkerTrace Worker(int32_t rank, const std::vector<Call>& calls, bool backward = true,
                           const std::string& description = "") {
  podscope::testing::HandTrace t(rank, 2);
  t.Step(1, 0, 10'000);
  if (backward) t.Span(5'000, 5'400, kBackward, common::HostSpanCategory::kOp, 2);
  for (const Call& c : calls) {
    t.Kernel(c.at + 100, c.at + 300, "ncclDevKernel_Generic", c.at, 20)
        .Collective(c.name, c.op, 0, c.bytes, 2, c.at);
  }
  common::WorkerTrace trace = t.Build();
  if (!description.empty()) trace.info.process_groups.push_back({"1", description, {0, 1}});
  return trace;
}

ParallelismReport Classify(const std::vector<common::WorkerTrace>& traces) {
  std::vector<std::vector<CommunicatorUse>> uses;
  for (const common::WorkerTrace& trace : traces)
    uses.push_back(ComputeWorkerCommunicators(trace, FindSteps(trace)));
  return FinishParallelism(std::move(uses));
}

TEST(ParallelismTest, ReductionsInTheForwardPassAreTensorParallel) {
  const std::vector<Call> calls = {{CollectiveOp::kAllReduce, 1'000, 64 << 20},
                                   {CollectiveOp::kAllReduce, 6'000, 64 << 20}};
  const ParallelismReport r = Classify({Worker(0, calls), Worker(1, calls)});
  ASSERT_EQ(r.communicators.size(), 1u);
  const CommunicatorUse& c = r.communicators[0];
  EXPECT_EQ(c.kind, ParallelismKind::kTensorParallel);
  EXPECT_EQ(c.members, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(c.calls, 4u);
  EXPECT_EQ(c.forward_calls, 2u);
  EXPECT_EQ(c.backward_calls, 2u);
  EXPECT_DOUBLE_EQ(c.CallsPerStep(), 2);
  EXPECT_EQ(c.reason, "128.0 MiB of its 256.0 MiB of reductions are called in the forward pass");
  EXPECT_EQ(r.dominant, ParallelismKind::kTensorParallel);
  EXPECT_DOUBLE_EQ(r.dominant_share, 1);
}

// Gradient buckets reduced from the backward pass on; a loss AllReduce of 4 bytes in the forward
// pass is under a tenth of the reduced bytes, so it does not make the group tensor-parallel.
TEST(ParallelismTest, ReductionsFromTheBackwardPassOnAreDataParallel) {
  const std::vector<Call> calls = {{CollectiveOp::kAllReduce, 1'000, 4},
                                   {CollectiveOp::kAllReduce, 5'500, 25 << 20},
                                   {CollectiveOp::kAllReduce, 7'000, 25 << 20}};
  const ParallelismReport r = Classify({Worker(0, calls), Worker(1, calls)});
  ASSERT_EQ(r.communicators.size(), 1u);
  EXPECT_EQ(r.communicators[0].kind, ParallelismKind::kDataParallel);
  EXPECT_EQ(r.communicators[0].reason, "reductions only from the backward pass on");
  // At exactly a tenth in the forward pass it is tensor-parallel.
  const std::vector<Call> tenth = {{CollectiveOp::kAllReduce, 1'000, 10},
                                   {CollectiveOp::kAllReduce, 5'500, 90}};
  EXPECT_EQ(Classify({Worker(0, tenth)}).communicators[0].kind, ParallelismKind::kTensorParallel);
}

TEST(ParallelismTest, ForwardGathersWithLaterReduceScattersAreShardedDataParallel) {
  const std::vector<Call> calls = {{CollectiveOp::kAllGather, 1'000, 8 << 20},
                                   {CollectiveOp::kAllGather, 5'500, 8 << 20},
                                   {CollectiveOp::kReduceScatter, 6'000, 8 << 20}};
  const ParallelismReport r = Classify({Worker(0, calls)});
  EXPECT_EQ(r.communicators[0].kind, ParallelismKind::kShardedDataParallel);
  EXPECT_EQ(r.communicators[0].reason,
            "AllGathers in the forward pass (8.0 MiB), reductions only from the backward pass on");
}

TEST(ParallelismTest, PointToPointIsPipelineAndAllToAllIsItsOwnKindWhateverThePass) {
  const std::vector<Call> p2p = {{CollectiveOp::kSend, 1'000, 1 << 20},
                                 {CollectiveOp::kRecv, 6'000, 1 << 20}};
  const ParallelismReport pipeline = Classify({Worker(0, p2p, false)});
  EXPECT_EQ(pipeline.communicators[0].kind, ParallelismKind::kPipelineParallel);
  EXPECT_EQ(pipeline.communicators[0].unknown_pass_calls, 2u);
  const std::vector<Call> a2a = {{CollectiveOp::kAllToAll, 1'000, 1 << 20},
                                 {CollectiveOp::kAllReduce, 6'000, 1 << 20}};
  EXPECT_EQ(Classify({Worker(0, a2a)}).communicators[0].kind, ParallelismKind::kAllToAll);
}

TEST(ParallelismTest, WithoutBackwardOperatorsThePassAndSoTheKindIsUnknown) {
  const std::vector<Call> calls = {{CollectiveOp::kAllReduce, 1'000, 64 << 20}};
  const ParallelismReport r = Classify({Worker(0, calls, false)});
  EXPECT_EQ(r.communicators[0].kind, ParallelismKind::kUnknown);
  EXPECT_EQ(r.communicators[0].unknown_pass_calls, 1u);
  EXPECT_NE(r.communicators[0].reason.find("no backward operators"), std::string::npos);
  EXPECT_EQ(ParallelismKindName(r.dominant), "unknown");
}

// The process group's description decides before the calls do; a data-parallel group that
// gathers in the forward pass shards its parameters.
TEST(ParallelismTest, AProcessGroupsDescriptionDecidesFirst) {
  const std::vector<Call> forward = {{CollectiveOp::kAllReduce, 1'000, 64 << 20}};
  const ParallelismReport tp =
      Classify({Worker(0, forward, true, "DATA_PARALLEL_GROUP"), Worker(1, forward)});
  EXPECT_EQ(tp.communicators[0].kind, ParallelismKind::kDataParallel);
  EXPECT_EQ(tp.communicators[0].description, "DATA_PARALLEL_GROUP");
  EXPECT_EQ(tp.communicators[0].reason,
            "its process group is described as \"DATA_PARALLEL_GROUP\"");
  const std::vector<Call> backward = {{CollectiveOp::kAllReduce, 6'000, 64 << 20}};
  EXPECT_EQ(
      Classify({Worker(0, backward, true, "TENSOR_MODEL_PARALLEL_GROUP")}).communicators[0].kind,
      ParallelismKind::kTensorParallel);
  EXPECT_EQ(Classify({Worker(0, backward, true, "pp_group")}).communicators[0].kind,
            ParallelismKind::kPipelineParallel);
  EXPECT_EQ(Classify({Worker(0, backward, true, "ep")}).communicators[0].kind,
            ParallelismKind::kAllToAll);
  const std::vector<Call> gather = {{CollectiveOp::kAllGather, 1'000, 1 << 20}};
  EXPECT_EQ(Classify({Worker(0, gather, true, "dp")}).communicators[0].kind,
            ParallelismKind::kShardedDataParallel);
  // default_pg, or a name of two kinds, says nothing: the calls decide.
  EXPECT_EQ(Classify({Worker(0, forward, true, "default_pg")}).communicators[0].kind,
            ParallelismKind::kTensorParallel);
  EXPECT_EQ(Classify({Worker(0, backward, true, "EXPERT_TENSOR_PARALLEL")}).communicators[0].kind,
            ParallelismKind::kDataParallel);
}

// Two communicators: the kind with the most collective kernel time is what advice is for.
TEST(ParallelismTest, TheDominantKindIsTheOneWithTheMostCollectiveTime) {
  std::vector<Call> calls = {{CollectiveOp::kAllReduce, 1'000, 1 << 20, "pg:tp"},
                             {CollectiveOp::kAllReduce, 2'000, 1 << 20, "pg:tp"},
                             {CollectiveOp::kAllReduce, 6'000, 64 << 20, "pg:dp"}};
  const ParallelismReport r = Classify({Worker(0, calls)});
  ASSERT_EQ(r.communicators.size(), 2u);
  EXPECT_EQ(r.communicators[0].communicator, "pg:tp");  // 400 ns against 200
  EXPECT_EQ(r.communicators[0].kind, ParallelismKind::kTensorParallel);
  EXPECT_EQ(r.communicators[1].kind, ParallelismKind::kDataParallel);
  EXPECT_EQ(r.dominant, ParallelismKind::kTensorParallel);
  EXPECT_NEAR(r.dominant_share, 2.0 / 3.0, 1e-12);
}

}  // namespace
}  // namespace podscope::coordinator::analysis
