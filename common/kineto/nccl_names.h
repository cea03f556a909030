// Recognising NCCL work from names: kernel names, PyTorch collective names, dtypes.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/trace_model.h"

namespace podscope::common {

// True for NCCL device kernels: ncclKernel_*, ncclDevKernel_*, ncclSymkDevKernel_*, and
// anything else starting with "nccl".
bool IsNcclKernelName(std::string_view kernel_name);

// What a kernel name tells about a collective, e.g.
// "ncclKernel_AllReduce_RING_LL_Sum_float(...)" -> {kAllReduce, "RING", "LL"}.
struct NcclKernelInfo {
  CollectiveOp op = CollectiveOp::kUnknown;
  std::string_view algorithm;  // "RING", "TREE", "NVLS", ... or empty
  std::string_view protocol;   // "LL", "LL128", "SIMPLE" or empty
};
NcclKernelInfo ParseNcclKernelName(std::string_view kernel_name);

// PyTorch / c10d collective names: "allreduce", "all_reduce", "nccl:all_reduce",
// "_allgather_base", "reduce_scatter_tensor_coalesced", "alltoall_base", "send", ...
CollectiveOp CollectiveOpFromName(std::string_view name);

// Bytes per element of a dtype as PyTorch names it ("Float", "float", "BFloat16", "c10::Half",
// "Long", "int8_t", ...); 0 when unknown.
int DtypeSize(std::string_view dtype);

}  // namespace podscope::common
