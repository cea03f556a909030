// CUPTI activity records -> the trace model (common/worker_trace.h). Pure: takes records as CUPTI
// lays them out (CUDA 13's structs: Kernel10, Memcpy6, MemcpyPtoP4, Memset4, API, Synchronization2,
// ExternalCorrelation, Marker2), keeps them on the CUPTI clock, and at Finish maps every time
// onto the host clock, pairs NVTX range markers, and turns ranges whose names match the step
// pattern into steps. Tests feed it hand-built records.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "agent/probe/gpu_clock_map.h"
#include "common/step_pattern.h"
#include "common/worker_trace.h"

namespace podscope::agent::probe {

class CuptiRecordConverter {
 public:
  // `callback_name(domain, cbid)` names runtime and driver API records. `step_pattern` is an
  // RE2 regex; the last capture group that is all digits is the step number.
  CuptiRecordConverter(std::function<std::string(CUpti_CallbackDomain, uint32_t)> callback_name,
                       const std::string& step_pattern);

  // The window opens at `host_ns`: no record of it can be earlier. Finish forgets it.
  void OpenWindow(TimeNs host_ns) { window_open_ns_ = host_ns; }
  // Returns false for a record of a kind the probe does not ask for (it is skipped).
  bool Add(const CUpti_Activity* record);
  size_t records() const { return records_; }

  // The events converted so far, on the host clock, while the window goes on: NVTX ranges still
  // open and the framework ids of calls still to come are kept for the next take. Records
  // without true times are left out and counted (TakeDropped): a time of 0 (CUPTI's "none"), an
  // end before the start, or a time before the window (its opening, or its first clock pair,
  // less kClockMappingSlackNs). CUPTI can hand a buffer over between a take's clock pair and the
  // take, so only Finish holds records to the window's end too (its last pair plus the slack).
  common::WorkerTrace TakeCompleted(const GpuClockMap& clock) { return Take(clock, false); }
  // The rest of the window's events on the host clock; the converter starts over.
  common::WorkerTrace Finish(const GpuClockMap& clock);
  // Records left out since the last call, by reason ("kernels: no time", ...), and forgotten.
  std::map<std::string, uint64_t> TakeDropped();

 private:
  common::WorkerTrace Take(const GpuClockMap& clock, bool at_end);
  common::NameId KernelName(const char* mangled);
  common::NameId ApiName(CUpti_CallbackDomain domain, uint32_t cbid);
  void AddMarker(const CUpti_ActivityMarker2& m);
  int64_t StepNumberOf(std::string_view name) const;

  std::function<std::string(CUpti_CallbackDomain, uint32_t)> callback_name_;
  std::optional<common::StepPattern> step_pattern_;  // none: invalid (logged once at load)

  common::WorkerTrace trace_;  // on the CUPTI clock until Finish
  size_t records_ = 0;
  absl::flat_hash_map<const char*, common::NameId> kernel_names_;
  absl::flat_hash_map<uint64_t, common::NameId> api_names_;
  absl::flat_hash_map<uint32_t, int64_t> external_ids_;  // correlation id -> framework op id
  absl::flat_hash_map<uint32_t, int32_t> context_devices_;
  struct OpenRange {
    uint64_t start = 0;
    std::string name;
    int64_t thread = 0;
  };
  absl::flat_hash_map<uint32_t, OpenRange> open_ranges_;
  std::vector<uint32_t> sync_contexts_;  // per kernel-table row; device filled at Finish
  std::map<std::string, uint64_t> dropped_;
  std::optional<TimeNs> window_open_ns_;
};

}  // namespace podscope::agent::probe
