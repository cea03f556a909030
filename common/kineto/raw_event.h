// One trace event as read from a Kineto / Chrome-trace JSON file, before it becomes a row of
// the canonical model. String views point into the parser's buffers and live as long as the
// document being parsed.
#pragma once

#include <cstdint>
#include <string_view>

namespace podscope::common {

inline constexpr int64_t kAbsent = INT64_MIN;

// Collective metadata as PyTorch records it on record_param_comms ops and NCCL kernels.
struct RawCollectiveArgs {
  std::string_view collective_name;  // "Collective name"
  std::string_view dtype;            // "dtype"
  std::string_view group_name;       // "Process Group Name"
  std::string_view group_desc;       // "Process Group Description"
  std::string_view group_ranks;      // "Process Group Ranks", e.g. "[0, 1, 2, 3]"
  std::string_view comms_id;         // "Comms Id": the NCCL communicator's hash
  int64_t in_nelems = kAbsent;       // "In msg nelems"
  int64_t out_nelems = kAbsent;      // "Out msg nelems"
  int64_t group_size = kAbsent;      // "Group size"
  int64_t seq = kAbsent;             // "Seq"
  // Older schema: shape and type of the op's first input ("Input Dims", "Input type").
  int64_t input_elements = kAbsent;
  std::string_view input_type;
  // podscope's own export: NCCL algorithm, protocol, channels, communicator.
  std::string_view algorithm, protocol, communicator;
  int64_t channels = kAbsent;
};

struct RawArgs {
  int64_t device = kAbsent, stream = kAbsent, correlation = kAbsent, external_id = kAbsent;
  int64_t bytes = kAbsent;
  int64_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  int64_t registers = 0, shared_memory = 0;
  // `[memory]` instants: the allocator's event ("Device Type" 0 CPU, 1 CUDA).
  int64_t memory_device_type = kAbsent, memory_device_id = kAbsent, memory_bytes = kAbsent;
  int64_t total_allocated = kAbsent, total_reserved = kAbsent;
  // Metadata events ("M"): args.name (process / thread names).
  std::string_view name;
  RawCollectiveArgs collective;
};

struct RawEvent {
  char ph = 0;
  std::string_view cat, name;
  int64_t pid = kAbsent, tid = kAbsent;  // kAbsent also when given as a string
  int64_t ts = kAbsent, dur = kAbsent;   // nanoseconds
  RawArgs args;
};

}  // namespace podscope::common
