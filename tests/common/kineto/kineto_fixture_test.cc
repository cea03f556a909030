// The importer on the real shared fixtures. Expected counts were taken from the files with an
// independent reader (Python's json module): events per "cat" with ph "X".
#include <gtest/gtest.h>

#include <map>

#include "common/kineto/kineto_importer.h"
#include "common/trace_files.h"
#include "tests/test_paths.h"

namespace podscope::common {
namespace {

using podscope::testing::KinetoFixture;

struct Expected {
  int rank;
  size_t kernels, memcpys_and_memsets, runtime_calls, host_spans;
};

std::map<CollectiveOp, size_t> OpCounts(const WorkerTrace& w) {
  std::map<CollectiveOp, size_t> ops;
  for (CollectiveOp op : w.collectives.op) ++ops[op];
  return ops;
}

class TraceFilterFixtureTest : public ::testing::TestWithParam<Expected> {};

TEST_P(TraceFilterFixtureTest, ExactCountsStepsAndCollectives) {
  const Expected& e = GetParam();
  KinetoImporter importer;
  absl::StatusOr<ImportResult> r = importer.ImportFile(
      KinetoFixture("trace_filter/sampled_rank-" + std::to_string(e.rank) + ".json.gz"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->workers.size(), 1u);
  const WorkerTrace& w = r->workers[0];
  EXPECT_EQ(w.info.rank, e.rank);
  EXPECT_EQ(w.info.world_size, 128);
  EXPECT_EQ(w.info.backend, "nccl");
  EXPECT_EQ(w.kernels.size(), e.kernels);
  EXPECT_EQ(w.memcpys.size(), e.memcpys_and_memsets);
  EXPECT_EQ(w.runtime_calls.size(), e.runtime_calls);
  EXPECT_EQ(w.host_spans.size(), e.host_spans);
  EXPECT_EQ(r->stats.profiler_spans, 1u);
  EXPECT_EQ(r->stats.metadata, 44u);

  // Both ProfilerSteps, in order.
  EXPECT_EQ(w.steps.number, (std::vector<int64_t>{551, 552}));

  // The 10 ncclKernel_SendRecv kernels are communication, and nothing else is.
  size_t communication = 0;
  for (size_t i = 0; i < w.kernels.size(); ++i) {
    const bool is_send_recv =
        w.strings.Get(w.kernels.name[i]).starts_with("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t");
    EXPECT_EQ(w.kernels.kernel_class[i] == KernelClass::kCommunication, is_send_recv) << i;
    communication += is_send_recv;
  }
  EXPECT_EQ(communication, 10u);

  // Every one became a collective; the op comes from the enclosing nccl:* annotation.
  ASSERT_EQ(w.collectives.size(), 10u);
  EXPECT_EQ(OpCounts(w), (std::map<CollectiveOp, size_t>{{CollectiveOp::kAllReduce, 4},
                                                         {CollectiveOp::kAllGather, 2},
                                                         {CollectiveOp::kAllToAll, 4}}));
  for (size_t i = 0; i < w.collectives.size(); ++i) {
    EXPECT_GT(w.collectives.bytes[i], 0) << i;
    EXPECT_LE(w.collectives.enqueue[i], w.collectives.kernel_start[i]) << i;
    EXPECT_EQ(w.strings.Get(w.collectives.protocol[i]), "SIMPLE");
    EXPECT_EQ(w.collectives.channels[i], 16);
  }
  EXPECT_TRUE(w.Validate().ok());
}

INSTANTIATE_TEST_SUITE_P(Ranks, TraceFilterFixtureTest,
                         ::testing::Values(Expected{0, 1154, 50, 1204, 2402},
                                           Expected{1, 1104, 50, 1154, 2367}),
                         [](const ::testing::TestParamInfo<Expected>& info) {
                           return "rank" + std::to_string(info.param.rank);
                         });

TEST(TraceFilterFixtureTest, AllReduceBytesFromInputDims) {
  KinetoImporter importer;
  absl::StatusOr<ImportResult> r =
      importer.ImportFile(KinetoFixture("trace_filter/sampled_rank-0.json.gz"));
  ASSERT_TRUE(r.ok());
  const WorkerTrace& w = r->workers[0];
  // nccl:all_reduce with Input Dims [[19618307]] of float, launched with correlation 6981619.
  bool found = false;
  for (size_t i = 0; i < w.collectives.size(); ++i) {
    if (w.collectives.correlation[i] == 6981619) {
      found = true;
      EXPECT_EQ(w.collectives.op[i], CollectiveOp::kAllReduce);
      EXPECT_EQ(w.collectives.count[i], 19618307);
      EXPECT_EQ(w.collectives.bytes[i], 4 * 19618307);
    }
  }
  EXPECT_TRUE(found);
}

TEST(Dlrm8RankFixtureTest, LoadsAllRanksAsOneCapture) {
  absl::StatusOr<std::vector<std::string>> files = ExpandTraceInputs({KinetoFixture("dlrm_8rank")});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 8u);
  absl::StatusOr<Capture> capture = LoadCapture(*files);
  ASSERT_TRUE(capture.ok()) << capture.status();
  ASSERT_EQ(capture->workers.size(), 8u);
  const size_t kernels[] = {245, 310, 246, 315, 251, 245, 246, 246};
  const size_t copies[] = {16, 16, 16, 22, 22, 16, 16, 16};
  const size_t runtime[] = {525, 527, 513, 541, 523, 505, 515, 504};
  for (int r = 0; r < 8; ++r) {
    const WorkerTrace& w = capture->workers[r];
    EXPECT_EQ(w.info.rank, r);
    EXPECT_EQ(w.info.world_size, 8);
    EXPECT_EQ(w.kernels.size(), kernels[r]) << r;
    EXPECT_EQ(w.memcpys.size(), copies[r]) << r;
    EXPECT_EQ(w.runtime_calls.size(), runtime[r]) << r;
    EXPECT_EQ(w.host_spans.size(), 1673u) << r;
    EXPECT_EQ(w.steps.number, std::vector<int64_t>{10}) << r;
    ASSERT_EQ(w.info.devices.size(), 8u);
    EXPECT_EQ(w.info.devices[0].name, "Tesla V100-SXM2-32GB");
    // The limits occupancy is computed from, as the trace gives them.
    EXPECT_EQ(w.info.devices[3].id, 3);
    EXPECT_EQ(w.info.devices[3].compute_major, 7);
    EXPECT_EQ(w.info.devices[3].sm_count, 80);
    EXPECT_EQ(w.info.devices[3].max_threads_per_sm, 2048);
    EXPECT_EQ(w.info.devices[3].max_threads_per_block, 1024);
    EXPECT_EQ(w.info.devices[3].registers_per_sm, 65536);
    EXPECT_EQ(w.info.devices[3].registers_per_block, 65536);
    EXPECT_EQ(w.info.devices[3].shared_memory_per_sm, 98304);
    EXPECT_EQ(w.info.devices[3].shared_memory_per_block_optin, 98304);
    EXPECT_EQ(OpCounts(w), (std::map<CollectiveOp, size_t>{{CollectiveOp::kAllReduce, 3},
                                                           {CollectiveOp::kAllToAll, 5}}))
        << r;
  }
}

}  // namespace
}  // namespace podscope::common
