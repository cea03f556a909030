// The memory view (docs/gpu-efficiency.md), as the PyTorch profiler's: from the allocator's
// events, per worker and device the allocated and reserved bytes over time and their peaks, the
// operators that allocated most, and pod-wide the device nearest to running out of memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/intervals.h"
#include "common/capture.h"

namespace podscope::analysis {

struct MemoryPoint {
  TimeNs time = 0;
  int64_t allocated = -1;  // -1: no allocator event yet (a device with memory samples alone)
  int64_t reserved = -1;   // -1: the source does not say
};

struct DeviceMemory {
  int32_t device = 0;  // -1: the host
  uint64_t events = 0;
  int64_t peak_allocated_bytes = -1;  // -1: no allocator events, only memory samples
  TimeNs peak_time = 0;
  int64_t peak_reserved_bytes = -1;           // -1: unknown
  std::optional<int64_t> total_memory_bytes;  // the device's, when its record says
  std::optional<int64_t> headroom_bytes;      // total - the larger peak
  std::vector<MemoryPoint> timeline;          // at most kMemoryTimelinePoints, peaks kept
};

struct OperatorAllocation {
  std::string name;
  uint64_t allocations = 0;
  int64_t bytes = 0;
};

struct WorkerMemory {
  int32_t rank = 0;
  std::vector<DeviceMemory> devices;              // by device
  std::vector<OperatorAllocation> top_operators;  // by bytes allocated, at most 10
};

struct NearestOutOfMemory {
  int32_t rank = 0, device = 0;
  int64_t peak_bytes = 0, total_memory_bytes = 0, headroom_bytes = 0;
};

struct MemoryReport {
  std::vector<WorkerMemory> workers;  // by rank; workers without memory events are left out
  std::optional<NearestOutOfMemory> nearest_oom;
};

inline constexpr size_t kMemoryTimelinePoints = 200;

// When events carry no totals, the allocated bytes are the running sum of their sizes. Memory
// samples (bytes 0 and no allocated total: NVML's memory used, from the agent) give the reserved
// line alone. An allocation is attributed to the innermost operator (operators.h) around it on
// its thread. Pure.
MemoryReport ComputeMemory(const common::CaptureView& capture);
// The same in two parts, for workers read one at a time: each worker's (none for a worker
// without allocator events), then the report from them, in the capture view's order.
std::optional<WorkerMemory> ComputeWorkerMemory(const common::WorkerTrace& trace);
MemoryReport FinishMemory(std::vector<std::optional<WorkerMemory>> workers);

}  // namespace podscope::analysis
