// What each communicator's collectives are for: data-parallel gradient reduction, sharded data
// parallelism (FSDP, ZeRO-3), tensor parallelism, pipeline parallelism, or all-to-all exchange
// (expert or embedding parallelism). Advice about exposed communication depends on it: smaller
// gradient buckets help data parallelism and do nothing for a tensor-parallel layer's AllReduce.
//
// The evidence, strongest first (docs/analyses.md, "Kind of parallelism"):
//   1. the process group's description, when the trace gives it (Megatron's
//      TENSOR_MODEL_PARALLEL_GROUP, DATA_PARALLEL_GROUP, ...);
//   2. point-to-point only (Send/Recv): pipeline parallelism; mostly AllToAll: all-to-all;
//   3. the pass each call is made in. A call enqueued inside a backward operator, or after the
//      step's last one, is in the backward pass (gradient reduction, the optimizer); any other
//      call in a step with backward operators is in a forward pass, also between backward
//      operators, where a pipeline schedule (1F1B) or gradient accumulation runs the next
//      micro-batch's forward. Reductions (AllReduce, ReduceScatter) in a forward pass are a
//      tensor-parallel layer's; AllGathers there of about the size of the ReduceScatters later
//      are sharded data parallelism's (FSDP, ZeRO-3); reductions only in the backward pass are
//      gradient reduction.
// Without backward operators in a step (no host operators, or inference), or for a call whose
// enqueue time is not a host time, the pass is unknown; a communicator with no call of known
// pass has an unknown kind unless 1 or 2 decide it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/steps.h"
#include "common/capture.h"
#include "common/trace_model.h"

namespace podscope::analysis {

enum class ParallelismKind : uint8_t {
  kUnknown = 0,
  kDataParallel,
  kShardedDataParallel,
  kTensorParallel,
  kPipelineParallel,
  kAllToAll,
  kContextParallel,  // named so by its process group only: its Send/Recv look like a pipeline's
};
// "unknown", "data_parallel", "sharded_data_parallel", "tensor_parallel", "pipeline_parallel",
// "all_to_all", "context_parallel".
std::string_view ParallelismKindName(ParallelismKind kind);
// The same in words, for titles: "tensor-parallel", ...
std::string_view ParallelismKindWords(ParallelismKind kind);

// One communicator's collectives: on one worker while a capture is read, then summed over the
// workers that call it.
struct CommunicatorUse {
  std::string communicator;      // as the trace names it ("pg:3", or NCCL's communicator id)
  std::string description;       // the process group's, when the trace gives one
  int32_t size = 0;              // ranks in the communicator
  std::vector<int32_t> members;  // the capture's workers that call it, by rank
  uint64_t calls = 0;
  int64_t bytes = 0;
  TimeNs kernel_ns = 0;     // its collectives' kernel time
  TimeNs exposed_ns = 0;    // the part of it no compute kernel of the same worker ran beside
  size_t member_steps = 0;  // steps summed over its members: calls per step is calls / this
  std::array<uint64_t, common::kCollectiveOpCount> calls_by_op{};
  // Calls by pass: before the step's first backward operator, from it on, and where the trace
  // shows no backward operator in the step (or the call is outside every step).
  uint64_t forward_calls = 0, backward_calls = 0, unknown_pass_calls = 0;
  // Bytes of reductions (AllReduce, ReduceScatter, Reduce) and of AllGathers, and the part of
  // each called in the forward pass.
  int64_t reduce_bytes = 0, forward_reduce_bytes = 0;
  int64_t gather_bytes = 0, forward_gather_bytes = 0;
  int64_t reduce_scatter_bytes = 0;

  ParallelismKind kind = ParallelismKind::kUnknown;
  std::string reason;  // why that kind, in words

  double CallsPerStep() const {
    return member_steps ? static_cast<double>(calls) / static_cast<double>(member_steps) : 0;
  }
};

// Communicators of one kind, description and size: a job with tensor, pipeline and data
// parallelism has hundreds of communicators but a few such groups, what a screen can show.
struct CommunicatorGroup {
  ParallelismKind kind = ParallelismKind::kUnknown;
  std::string description;
  int32_t size = 0;
  size_t communicators = 0;
  std::string example;  // the communicator with the most exposed time
  std::string reason;   // its reason
  uint64_t calls = 0;
  size_t member_steps = 0;
  TimeNs kernel_ns = 0, exposed_ns = 0;
  double CallsPerStep() const {
    return member_steps ? static_cast<double>(calls) / static_cast<double>(member_steps) : 0;
  }
};

struct ParallelismReport {
  std::vector<CommunicatorUse> communicators;  // most exposed time first
  std::vector<CommunicatorGroup> groups;       // most exposed time first
  // The kind of the communicators with the most exposed collective time (kUnknown without
  // collectives): what advice about exposed communication is for. Exposed, not all, kernel
  // time: a large gradient AllReduce hidden behind the backward pass matters less than a small
  // tensor-parallel one nothing hides.
  ParallelismKind dominant = ParallelismKind::kUnknown;
  double dominant_share = 0;  // of all exposed collective time
};

// One worker's communicators, with the pass of each call found from its steps and host
// operators. Pure; any thread.
std::vector<CommunicatorUse> ComputeWorkerCommunicators(const common::WorkerTrace& trace,
                                                        const WorkerSteps& steps);

// Sums the workers' uses per communicator and decides each one's kind.
ParallelismReport FinishParallelism(std::vector<std::vector<CommunicatorUse>> workers);

// Both, for a capture in memory.
ParallelismReport ComputeParallelism(const common::CaptureView& capture,
                                     const std::vector<WorkerSteps>& steps);

}  // namespace podscope::analysis
