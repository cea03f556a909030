#include "common/kineto/nccl_names.h"

#include <gtest/gtest.h>

namespace podscope::common {
namespace {

TEST(NcclNamesTest, RecognisesNcclKernels) {
  EXPECT_TRUE(IsNcclKernelName(
      "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"));
  EXPECT_TRUE(
      IsNcclKernelName("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
  EXPECT_TRUE(IsNcclKernelName("ncclSymkDevKernel_AllReduce_AGxLL_R_sum_bf16"));
  EXPECT_TRUE(IsNcclKernelName("void ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"));
  EXPECT_FALSE(IsNcclKernelName("void at::native::vectorized_elementwise_kernel<4>"));
  EXPECT_FALSE(IsNcclKernelName("Memcpy HtoD"));
}

TEST(NcclNamesTest, ParsesOpAlgorithmAndProtocol) {
  NcclKernelInfo a = ParseNcclKernelName("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)");
  EXPECT_EQ(a.op, CollectiveOp::kAllReduce);
  EXPECT_EQ(a.algorithm, "RING");
  EXPECT_EQ(a.protocol, "LL");
  NcclKernelInfo b = ParseNcclKernelName("ncclDevKernel_ReduceScatter_Sum_bf16_NVLS_TREE_LL128");
  EXPECT_EQ(b.op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(b.algorithm, "NVLS_TREE");
  EXPECT_EQ(b.protocol, "LL128");
  NcclKernelInfo c = ParseNcclKernelName("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(x)");
  EXPECT_EQ(c.op, CollectiveOp::kSendRecv);
  EXPECT_EQ(c.protocol, "SIMPLE");
  NcclKernelInfo d = ParseNcclKernelName("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)");
  EXPECT_EQ(d.op, CollectiveOp::kUnknown);
  EXPECT_EQ(d.algorithm, "");
}

TEST(NcclNamesTest, CollectiveNamesFromPyTorch) {
  EXPECT_EQ(CollectiveOpFromName("allreduce"), CollectiveOp::kAllReduce);
  EXPECT_EQ(CollectiveOpFromName("nccl:all_reduce"), CollectiveOp::kAllReduce);
  EXPECT_EQ(CollectiveOpFromName("nccl:_all_gather_base"), CollectiveOp::kAllGather);
  EXPECT_EQ(CollectiveOpFromName("all_gather_into_tensor_coalesced"), CollectiveOp::kAllGather);
  EXPECT_EQ(CollectiveOpFromName("reduce_scatter_tensor"), CollectiveOp::kReduceScatter);
  EXPECT_EQ(CollectiveOpFromName("nccl:all_to_all"), CollectiveOp::kAllToAll);
  EXPECT_EQ(CollectiveOpFromName("alltoall_base"), CollectiveOp::kAllToAll);
  EXPECT_EQ(CollectiveOpFromName("broadcast"), CollectiveOp::kBroadcast);
  EXPECT_EQ(CollectiveOpFromName("reduce"), CollectiveOp::kReduce);
  EXPECT_EQ(CollectiveOpFromName("send"), CollectiveOp::kSend);
  EXPECT_EQ(CollectiveOpFromName("recv"), CollectiveOp::kRecv);
  EXPECT_EQ(CollectiveOpFromName("barrier"), CollectiveOp::kBarrier);
  EXPECT_EQ(CollectiveOpFromName("AllReduce"), CollectiveOp::kAllReduce);
  EXPECT_EQ(CollectiveOpFromName("something"), CollectiveOp::kUnknown);
}

TEST(NcclNamesTest, DtypeSizes) {
  EXPECT_EQ(DtypeSize("Float"), 4);
  EXPECT_EQ(DtypeSize("float"), 4);
  EXPECT_EQ(DtypeSize("BFloat16"), 2);
  EXPECT_EQ(DtypeSize("c10::Half"), 2);
  EXPECT_EQ(DtypeSize("long"), 8);
  EXPECT_EQ(DtypeSize("Long"), 8);
  EXPECT_EQ(DtypeSize("int"), 4);
  EXPECT_EQ(DtypeSize("unsigned char"), 1);
  EXPECT_EQ(DtypeSize("signed char"), 1);
  EXPECT_EQ(DtypeSize("TensorList"), 0);
}

}  // namespace
}  // namespace podscope::common
