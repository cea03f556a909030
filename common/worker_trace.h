// One worker's (rank's) events in its own clock domain, plus what is known about it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/clock_model.h"
#include "common/string_table.h"
#include "common/trace_model.h"

namespace podscope::common {

struct DeviceInfo {
  int32_t id = 0;
  std::string name;
  int64_t total_memory_bytes = 0;
  int32_t compute_major = 0, compute_minor = 0, sm_count = 0;
  // The limits occupancy is computed from (analysis/occupancy.h); 0 when the source
  // does not say, and then the compute capability's are used.
  int32_t max_threads_per_sm = 0, max_threads_per_block = 0, registers_per_sm = 0,
          registers_per_block = 0;
  int64_t shared_memory_per_sm = 0, shared_memory_per_block_optin = 0;
  friend bool operator==(const DeviceInfo&, const DeviceInfo&) = default;
};

struct ProcessGroupInfo {
  std::string name;         // e.g. "0"
  std::string description;  // e.g. "default_pg"
  std::vector<int32_t> ranks;
  friend bool operator==(const ProcessGroupInfo&, const ProcessGroupInfo&) = default;
};

// A named host thread or GPU stream track (from trace metadata).
struct TrackName {
  int64_t id = 0;
  bool is_stream = false;
  std::string name;
  friend bool operator==(const TrackName&, const TrackName&) = default;
};

struct WorkerInfo {
  int32_t rank = -1;
  int32_t world_size = 0;
  int32_t local_rank = -1;
  int64_t pid = 0;
  std::string host;
  std::string job;
  std::string backend;       // "nccl", ...
  std::string process_name;  // as the trace names the process
  std::string source;        // where it came from (file path, agent)
  std::vector<DeviceInfo> devices;
  std::vector<ProcessGroupInfo> process_groups;
  std::vector<TrackName> tracks;

  // "rank 3 (node-7)", or the process name / pid when the host is unknown.
  std::string DisplayName() const;
};

// Per-kind event counts, used by inspect, tests and round-trip checks.
struct EventCounts {
  size_t kernels = 0, memcpys = 0, runtime_calls = 0, host_spans = 0, collectives = 0, steps = 0,
         host_samples = 0, memory_events = 0;
  size_t Total() const {
    return kernels + memcpys + runtime_calls + host_spans + collectives + steps + host_samples +
           memory_events;
  }
  friend bool operator==(const EventCounts&, const EventCounts&) = default;
};

// Owned by whoever loaded it (importer, decoder, store); immutable once analyses start.
struct WorkerTrace {
  WorkerInfo info;
  ClockModel clock;
  StringTable strings;
  KernelTable kernels;
  MemcpyTable memcpys;
  RuntimeCallTable runtime_calls;
  HostSpanTable host_spans;
  CollectiveTable collectives;
  StepTable steps;
  HostSampleTable host_samples;
  MemoryEventTable memory_events;

  EventCounts Counts() const;
  // Sorts every table by start time (stable), as analyses expect.
  void SortByTime();
  // Checks column lengths, name ids and enum ranges; errors name the table and row.
  absl::Status Validate() const;
  // Earliest start and latest end over device and host events (own clock); {0,0} if empty.
  std::pair<TimeNs, TimeNs> TimeRange() const;
};

}  // namespace podscope::common
