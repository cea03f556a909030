#include "analysis/parallelism.h"

#include <gtest/gtest.h>

#include "tests/analysis/hand_trace.h"

namespace podscope::analysis {
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
  EXPECT_EQ(r.communicators[0].reason, "reductions only in the backward pass");
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
            "AllGathers in the forward pass (8.0 MiB), reductions only in the backward pass");
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
  const ParallelismReport dp =
      Classify({Worker(0, forward, true, "DATA_PARALLEL_GROUP"), Worker(1, forward)});
  EXPECT_EQ(dp.communicators[0].kind, ParallelismKind::kDataParallel);
  EXPECT_EQ(dp.communicators[0].description, "DATA_PARALLEL_GROUP");
  EXPECT_EQ(dp.communicators[0].reason,
            "its process group is described as \"DATA_PARALLEL_GROUP\"");
  const std::vector<Call> backward = {{CollectiveOp::kAllReduce, 6'000, 64 << 20}};
  EXPECT_EQ(
      Classify({Worker(0, backward, true, "TENSOR_MODEL_PARALLEL_GROUP")}).communicators[0].kind,
      ParallelismKind::kTensorParallel);
  EXPECT_EQ(Classify({Worker(0, backward, true, "pp_group")}).communicators[0].kind,
            ParallelismKind::kPipelineParallel);
  EXPECT_EQ(Classify({Worker(0, backward, true, "ep")}).communicators[0].kind,
            ParallelismKind::kAllToAll);
  const std::vector<Call> gather = {{CollectiveOp::kAllGather, 1'000, 1 << 20},
                                    {CollectiveOp::kReduceScatter, 6'000, 1 << 20}};
  EXPECT_EQ(Classify({Worker(0, gather, true, "dp")}).communicators[0].kind,
            ParallelismKind::kShardedDataParallel);
  EXPECT_EQ(Classify({Worker(0, backward, true, "CONTEXT_PARALLEL_GROUP")}).communicators[0].kind,
            ParallelismKind::kContextParallel);
  // default_pg, or a name of two kinds, says nothing: the calls decide.
  EXPECT_EQ(Classify({Worker(0, forward, true, "default_pg")}).communicators[0].kind,
            ParallelismKind::kTensorParallel);
  EXPECT_EQ(Classify({Worker(0, backward, true, "EXPERT_TENSOR_PARALLEL")}).communicators[0].kind,
            ParallelismKind::kDataParallel);
}

// Two communicators, nothing computing beside them: the kind with the most exposed time is what
// advice is for.
TEST(ParallelismTest, WithNothingComputingBesideThemAllCollectiveTimeIsExposed) {
  std::vector<Call> calls = {{CollectiveOp::kAllReduce, 1'000, 1 << 20, "pg:tp"},
                             {CollectiveOp::kAllReduce, 2'000, 1 << 20, "pg:tp"},
                             {CollectiveOp::kAllReduce, 6'000, 64 << 20, "pg:dp"}};
  const ParallelismReport r = Classify({Worker(0, calls)});
  ASSERT_EQ(r.communicators.size(), 2u);
  EXPECT_EQ(r.communicators[0].communicator, "pg:tp");  // 400 ns exposed against 200
  EXPECT_EQ(r.communicators[0].kind, ParallelismKind::kTensorParallel);
  EXPECT_EQ(r.communicators[1].kind, ParallelismKind::kDataParallel);
  EXPECT_EQ(r.dominant, ParallelismKind::kTensorParallel);
  EXPECT_NEAR(r.dominant_share, 2.0 / 3.0, 1e-12);
}

// A worker of a hand-made schedule: backward operators over `backward` (on the autograd
// thread), compute kernels over `compute`, and the calls, in one step of [0, 100'000).
struct Schedule {
  std::vector<std::pair<common::TimeNs, common::TimeNs>> backward;
  std::vector<std::pair<common::TimeNs, common::TimeNs>> compute;
  std::vector<Call> calls;
  common::TimeNs kernel_ns = 200;  // each collective's kernel, starting 100 ns after its call
};

common::WorkerTrace Scheduled(const Schedule& schedule, int32_t rank = 0) {
  podscope::testing::HandTrace t(rank, 2);
  t.Step(1, 0, 100'000);
  for (const auto& [start, end] : schedule.backward)
    t.Span(start, end, kBackward, common::HostSpanCategory::kOp, 2);
  for (const auto& [start, end] : schedule.compute) t.Kernel(start, end, "gemm", start - 10);
  for (const Call& c : schedule.calls) {
    t.Kernel(c.at + 100, c.at + 100 + schedule.kernel_ns, "ncclDevKernel_Generic", c.at, 20)
        .Collective(c.name, c.op, 0, c.bytes, 2, c.at);
  }
  return t.Build();
}

// 1F1B on a pipeline stage, or gradient accumulation: 8 micro-batches, each a forward then a
// backward, the tensor-parallel AllReduce in both. Only the first forward comes before the
// step's first backward operator; the other seven run between backward operators, and are
// forward too.
TEST(ParallelismTest, ForwardsBetweenBackwardOperatorsAreForward) {
  Schedule s;
  for (int m = 0; m < 8; ++m) {
    const common::TimeNs at = m * 10'000;
    s.calls.push_back({CollectiveOp::kAllReduce, at + 1'000, 1 << 20});  // forward
    s.backward.push_back({at + 5'000, at + 6'000});
    s.calls.push_back({CollectiveOp::kAllReduce, at + 5'500, 1 << 20});  // inside backward
  }
  const ParallelismReport r = Classify({Scheduled(s)});
  const CommunicatorUse& c = r.communicators.at(0);
  EXPECT_EQ(c.forward_calls, 8u);
  EXPECT_EQ(c.backward_calls, 8u);
  EXPECT_EQ(c.kind, ParallelismKind::kTensorParallel);

  // Data parallelism under the same schedule: each micro-batch's loss AllReduce (4 bytes) in
  // the forward pass, the gradient buckets inside the last backward and after it.
  Schedule d;
  for (int m = 0; m < 8; ++m) {
    const common::TimeNs at = m * 10'000;
    d.calls.push_back({CollectiveOp::kAllReduce, at + 1'000, 4});
    d.backward.push_back({at + 5'000, at + 6'000});
  }
  d.calls.push_back({CollectiveOp::kAllReduce, 75'500, 25 << 20});  // a bucket, in a hook
  d.calls.push_back({CollectiveOp::kAllReduce, 90'000, 25 << 20});  // the last, after backward
  const ParallelismReport dr = Classify({Scheduled(d)});
  EXPECT_EQ(dr.communicators.at(0).kind, ParallelismKind::kDataParallel);
  EXPECT_EQ(dr.communicators.at(0).backward_calls, 2u);
}

// Megatron's sequence parallelism: an AllGather before and a ReduceScatter after each layer, in
// the forward pass and in the backward. Reductions in the forward pass: tensor-parallel.
TEST(ParallelismTest, SequenceParallelLayersAreTensorParallel) {
  Schedule s;
  s.backward = {{50'000, 51'000}, {60'000, 61'000}};
  for (common::TimeNs at : {1'000, 10'000}) {
    s.calls.push_back({CollectiveOp::kAllGather, at, 8 << 20});
    s.calls.push_back({CollectiveOp::kReduceScatter, at + 2'000, 8 << 20});
  }
  for (common::TimeNs at : {50'200, 60'200}) {
    s.calls.push_back({CollectiveOp::kAllGather, at, 8 << 20});
    s.calls.push_back({CollectiveOp::kReduceScatter, at + 300, 8 << 20});
  }
  EXPECT_EQ(Classify({Scheduled(s)}).communicators.at(0).kind, ParallelismKind::kTensorParallel);
}

// AllGathers in the forward pass are sharding only when they are of the order of the gradients
// reduce-scattered later: FSDP is; SyncBatchNorm's statistics or a contrastive loss's features
// beside gradient AllReduces are not.
TEST(ParallelismTest, OnlyParameterSizedForwardGathersMakeShardedDataParallel) {
  Schedule fsdp;
  fsdp.backward = {{50'000, 60'000}};
  fsdp.calls = {{CollectiveOp::kAllGather, 1'000, 64 << 20},
                {CollectiveOp::kAllGather, 50'100, 64 << 20},
                {CollectiveOp::kReduceScatter, 55'000, 64 << 20}};
  EXPECT_EQ(Classify({Scheduled(fsdp)}).communicators.at(0).kind,
            ParallelismKind::kShardedDataParallel);

  Schedule sync_bn;
  sync_bn.backward = {{50'000, 60'000}};
  sync_bn.calls = {{CollectiveOp::kAllGather, 1'000, 4'096},
                   {CollectiveOp::kAllGather, 2'000, 4'096},
                   {CollectiveOp::kAllReduce, 55'000, 25 << 20}};
  EXPECT_EQ(Classify({Scheduled(sync_bn)}).communicators.at(0).kind,
            ParallelismKind::kDataParallel);

  // A ZeRO-style reduce-scatter with a forward gather a tenth its size: not FSDP's pattern.
  Schedule small;
  small.backward = {{50'000, 60'000}};
  small.calls = {{CollectiveOp::kAllGather, 1'000, 6 << 20},
                 {CollectiveOp::kReduceScatter, 55'000, 64 << 20}};
  EXPECT_EQ(Classify({Scheduled(small)}).communicators.at(0).kind, ParallelismKind::kDataParallel);
}

// A call whose enqueue is its kernel's start (no launch linked in the trace) has no host time
// to compare with the operators: its pass is unknown.
TEST(ParallelismTest, AnEnqueueThatIsTheDevicesTimeHasNoPass) {
  podscope::testing::HandTrace t(0, 1);
  t.Step(1, 0, 10'000).Span(5'000, 6'000, kBackward, common::HostSpanCategory::kOp, 2);
  t.Kernel(1'000, 1'200, "ncclDevKernel_Generic", -1, 20)
      .Collective("pg:1", CollectiveOp::kAllReduce, 0, 1 << 20, 2, 1'000);
  const ParallelismReport r = Classify({t.Build()});
  EXPECT_EQ(r.communicators.at(0).unknown_pass_calls, 1u);
  EXPECT_EQ(r.communicators.at(0).kind, ParallelismKind::kUnknown);
}

// The advice is for what is exposed: a large gradient AllReduce hidden behind compute kernels
// weighs nothing against a small tensor-parallel AllReduce nothing hides.
TEST(ParallelismTest, TheDominantKindIsTheOneWithTheMostExposedTime) {
  Schedule s;
  s.backward = {{50'000, 70'000}};
  s.compute = {{50'000, 70'000}};
  s.kernel_ns = 5'000;
  s.calls = {{CollectiveOp::kAllReduce, 1'000, 1 << 20, "pg:tp"},
             {CollectiveOp::kAllReduce, 55'000, 256 << 20, "pg:dp"},
             {CollectiveOp::kAllReduce, 60'000, 256 << 20, "pg:dp"}};
  const ParallelismReport r = Classify({Scheduled(s)});
  ASSERT_EQ(r.communicators.size(), 2u);
  EXPECT_EQ(r.communicators[0].communicator, "pg:tp");
  EXPECT_EQ(r.communicators[0].exposed_ns, 5'000);
  EXPECT_EQ(r.communicators[1].communicator, "pg:dp");
  EXPECT_EQ(r.communicators[1].kernel_ns, 10'000);
  EXPECT_EQ(r.communicators[1].exposed_ns, 0);
  EXPECT_EQ(r.dominant, ParallelismKind::kTensorParallel);
  EXPECT_DOUBLE_EQ(r.dominant_share, 1);
}

// Tensor x pipeline x data parallelism has a communicator per group of ranks; a screen shows
// one line per kind, description and size.
TEST(ParallelismTest, CommunicatorsOfOneKindAndSizeAreOneGroup) {
  Schedule s;
  s.backward = {{50'000, 60'000}};
  for (int g = 0; g < 3; ++g) {
    s.calls.push_back(
        {CollectiveOp::kAllReduce, 1'000 + g * 1'000, 1 << 20, "pg:tp" + std::to_string(g)});
  }
  s.calls.push_back({CollectiveOp::kAllReduce, 55'000, 1 << 20, "pg:dp"});
  const ParallelismReport r = Classify({Scheduled(s)});
  ASSERT_EQ(r.communicators.size(), 4u);
  ASSERT_EQ(r.groups.size(), 2u);
  EXPECT_EQ(r.groups[0].kind, ParallelismKind::kTensorParallel);
  EXPECT_EQ(r.groups[0].communicators, 3u);
  EXPECT_EQ(r.groups[0].calls, 3u);
  EXPECT_EQ(r.groups[1].kind, ParallelismKind::kDataParallel);
  EXPECT_EQ(r.groups[1].communicators, 1u);
  EXPECT_EQ(r.groups[1].example, "pg:dp");
}

}  // namespace
}  // namespace podscope::analysis
