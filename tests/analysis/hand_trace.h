// Builds small worker traces by hand for analysis tests: kernels launched by runtime calls,
// copies, host spans and steps, with exact nanosecond times.
#pragma once

#include <string>

#include "common/worker_trace.h"

namespace podscope::testing {

class HandTrace {
 public:
  explicit HandTrace(int32_t rank = 0, int32_t world_size = 1) {
    trace_.info.rank = rank;
    trace_.info.world_size = world_size;
  }

  // A kernel on `stream` over [start, end), launched at `launch` (-1: no launch call).
  HandTrace& Kernel(common::TimeNs start, common::TimeNs end, const std::string& name = "gemm",
                    common::TimeNs launch = -1, int32_t stream = 7) {
    using namespace common;
    KernelTable& k = trace_.kernels;
    const int64_t correlation = next_correlation_++;
    k.start.push_back(start);
    k.end.push_back(end);
    k.device.push_back(0);
    k.stream.push_back(stream);
    k.name.push_back(trace_.strings.Intern(name));
    k.correlation.push_back(correlation);
    for (auto* v : {&k.grid_x, &k.grid_y, &k.grid_z, &k.block_x, &k.block_y, &k.block_z})
      v->push_back(1);
    k.registers_per_thread.push_back(32);
    k.shared_memory_bytes.push_back(0);
    k.kernel_class.push_back(name.starts_with("nccl") ? KernelClass::kCommunication
                                                      : KernelClass::kCompute);
    if (launch >= 0) Runtime(launch, launch + 5, "cudaLaunchKernel", correlation);
    return *this;
  }

  HandTrace& Memcpy(common::TimeNs start, common::TimeNs end, common::MemcpyKind kind,
                    common::TimeNs launch = -1, int64_t bytes = 1024) {
    using namespace common;
    MemcpyTable& m = trace_.memcpys;
    const int64_t correlation = next_correlation_++;
    m.start.push_back(start);
    m.end.push_back(end);
    m.device.push_back(0);
    m.stream.push_back(7);
    m.name.push_back(trace_.strings.Intern("Memcpy"));
    m.bytes.push_back(bytes);
    m.correlation.push_back(correlation);
    m.kind.push_back(kind);
    if (launch >= 0) Runtime(launch, launch + 5, "cudaMemcpyAsync", correlation);
    return *this;
  }

  HandTrace& Runtime(common::TimeNs start, common::TimeNs end, const std::string& name,
                     int64_t correlation = -1, int64_t thread = 1) {
    using namespace common;
    RuntimeCallTable& r = trace_.runtime_calls;
    r.start.push_back(start);
    r.end.push_back(end);
    r.thread.push_back(thread);
    r.name.push_back(trace_.strings.Intern(name));
    r.correlation.push_back(correlation);
    r.external_id.push_back(-1);
    r.api_kind.push_back(ApiKind::kRuntime);
    return *this;
  }

  HandTrace& Span(common::TimeNs start, common::TimeNs end, const std::string& name,
                  common::HostSpanCategory category = common::HostSpanCategory::kOp,
                  int64_t thread = 1) {
    using namespace common;
    HostSpanTable& h = trace_.host_spans;
    h.start.push_back(start);
    h.end.push_back(end);
    h.thread.push_back(thread);
    h.name.push_back(trace_.strings.Intern(name));
    h.category.push_back(category);
    h.step.push_back(kNoStep);
    h.external_id.push_back(-1);
    return *this;
  }

  HandTrace& Step(int64_t number, common::TimeNs start, common::TimeNs end) {
    Span(start, end, "ProfilerStep#" + std::to_string(number),
         common::HostSpanCategory::kAnnotation);
    trace_.host_spans.step.back() = number;
    common::StepTable& s = trace_.steps;
    s.number.push_back(number);
    s.start.push_back(start);
    s.end.push_back(end);
    s.thread.push_back(1);
    return *this;
  }

  // A collective row for the most recently added kernel.
  HandTrace& Collective(const std::string& communicator, common::CollectiveOp op, int64_t sequence,
                        int64_t bytes, int32_t nranks, common::TimeNs enqueue) {
    using namespace common;
    CollectiveTable& c = trace_.collectives;
    const size_t k = trace_.kernels.size() - 1;
    c.communicator.push_back(trace_.strings.Intern(communicator));
    c.rank.push_back(trace_.info.rank);
    c.nranks.push_back(nranks);
    c.op.push_back(op);
    c.sequence.push_back(sequence);
    c.count.push_back(bytes / 4);
    c.dtype.push_back(trace_.strings.Intern("float"));
    c.bytes.push_back(bytes);
    c.algorithm.push_back(trace_.strings.Intern("RING"));
    c.protocol.push_back(trace_.strings.Intern("SIMPLE"));
    c.channels.push_back(8);
    c.enqueue.push_back(enqueue);
    c.kernel_start.push_back(trace_.kernels.start[k]);
    c.kernel_end.push_back(trace_.kernels.end[k]);
    c.correlation.push_back(trace_.kernels.correlation[k]);
    return *this;
  }

  // The last kernel's launch shape: blocks in the grid, threads per block, registers per
  // thread, shared memory per block.
  HandTrace& Shape(uint32_t grid, uint32_t block, int32_t registers = 32,
                   int32_t shared_bytes = 0) {
    common::KernelTable& k = trace_.kernels;
    k.grid_x.back() = grid;
    k.block_x.back() = block;
    k.registers_per_thread.back() = registers;
    k.shared_memory_bytes.back() = shared_bytes;
    return *this;
  }

  HandTrace& Device(const common::DeviceInfo& device) {
    trace_.info.devices.push_back(device);
    return *this;
  }

  common::WorkerTrace Build() {
    common::WorkerTrace out = trace_;
    out.SortByTime();
    return out;
  }

 private:
  common::WorkerTrace trace_;
  int64_t next_correlation_ = 1;
};

}  // namespace podscope::testing
