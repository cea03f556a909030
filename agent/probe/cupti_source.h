// CUDA activity inside a capture window, through CUPTI's Activity API.
//
// Nothing of CUPTI is on outside a window: OpenWindow subscribes (which is also how the probe
// learns that another tool holds CUPTI: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED becomes
// the window's error, never a crash), enables the activity kinds and the launch-related driver
// calls, and reads a (CUPTI, host) clock pair; TakeRecorded, while the window runs, asks CUPTI
// for the buffers it has finished with, reads a pair and hands their records over;
// CloseWindow disables all of it, forces a flush, reads the last pair and unsubscribes.
//
// CUPTI asks for buffers from its own threads; they come from a fixed pool. When the pool is
// empty CUPTI gets none and drops records, which it counts (cuptiActivityGetNumDroppedRecords)
// and the window reports. Records beyond the window's event budget are dropped and counted too.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/probe/cupti_api.h"
#include "agent/probe/cupti_records.h"
#include "agent/probe/event_source.h"

namespace podscope::agent::probe {

struct CuptiSourceOptions {
  size_t buffers = 32;
  size_t buffer_bytes = 4u << 20;
  std::string step_pattern;
  TimeNs (*host_now)() = nullptr;  // null: CLOCK_REALTIME
};

class CuptiSource : public EventSource {
 public:
  // Registers the buffer callbacks with `api` (one CuptiSource per process: CUPTI has one set
  // of callbacks). `api` must outlive the source.
  CuptiSource(CuptiApi* api, CuptiSourceOptions options);
  ~CuptiSource() override;

  std::string_view name() const override { return "cupti"; }
  void OpenWindow(TimeNs host_now, EventBudget* budget, GpuClockMap* gpu_clock) override;
  // Flushes the buffers CUPTI has finished with and hands over their records.
  Harvest TakeRecorded() override;
  void CloseWindow(TimeNs host_now) override;
  Harvest TakeHarvest() override;

  // CUPTI's buffer callbacks land here (through a process-wide trampoline).
  void RequestBuffer(uint8_t** buffer, size_t* size, size_t* max_records);
  void CompleteBuffer(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t valid_size);

  // Buffers handed to CUPTI and not returned yet; buffers CUPTI asked for and did not get.
  size_t buffers_out() const;
  uint64_t buffers_refused() const;
  // Adds a (CUPTI timestamp, host time) pair to `clock`; watch data's clock between windows.
  void ReadClockPair(GpuClockMap* clock);

 private:
  // Asks CUPTI for its buffers (`flush_flag` 0: those it has finished with; FORCED: all), whose
  // records reach CompleteBuffer on this thread, then reads a clock pair into the window's map.
  // Without mu_ held: CUPTI calls back into the source.
  void FlushAndReadClockPair(uint32_t flush_flag);
  // Moves the converter's count of records without true times into `h`.
  void TakeInvalid(Harvest* h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "cuptiActivityEnable(CONCURRENT_KERNEL): CUPTI_ERROR_... (what it means)".
  std::string Describe(const char* call, CUptiResult result);

  CuptiApi* api_;
  const CuptiSourceOptions options_;
  std::string init_error_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<CUpti_ActivityKind> enabled_;
  std::vector<CUpti_CallbackId> driver_calls_;

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<uint8_t[]>> free_ ABSL_GUARDED_BY(mu_);
  size_t allocated_ ABSL_GUARDED_BY(mu_) = 0;
  size_t out_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  EventBudget* budget_ ABSL_GUARDED_BY(mu_) = nullptr;
  GpuClockMap* gpu_clock_ ABSL_GUARDED_BY(mu_) = nullptr;
  CuptiRecordConverter converter_ ABSL_GUARDED_BY(mu_);
  uint64_t cupti_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::string error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podscope::agent::probe
