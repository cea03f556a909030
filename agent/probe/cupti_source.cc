#include "agent/probe/cupti_source.h"

#include <atomic>

#include "common/str_util.h"

namespace podscope::agent::probe {

namespace {

std::atomic<CuptiSource*> g_source{nullptr};

void OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  CuptiSource* source = g_source.load();
  if (source == nullptr) {
    *buffer = nullptr;
    *size = 0;
    return;
  }
  source->RequestBuffer(buffer, size, max_records);
}

void OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                       size_t valid_size) {
  if (CuptiSource* source = g_source.load(); source != nullptr)
    source->CompleteBuffer(context, stream_id, buffer, valid_size);
}

void IgnoreCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// What the window records (issues 6, 18): kernels, copies, memsets, runtime calls,
// synchronisation, the framework's correlation ids, NVTX ranges, and device memory taken from
// and given back to CUDA.
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_MARKER,
    CUPTI_ACTIVITY_KIND_MEMORY2,
};

// Driver calls that launch work: enough to tie kernels launched below the runtime (NCCL,
// Triton, CUDA graphs) to a host thread, without recording every driver call.
constexpr CUpti_CallbackId kLaunchCalls[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

std::string_view KindName(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return "MEMCPY2";
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return "MEMSET";
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return "SYNCHRONIZATION";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return "EXTERNAL_CORRELATION";
    case CUPTI_ACTIVITY_KIND_MARKER:
      return "MARKER";
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      return "MEMORY2";
    default:
      return "activity";
  }
}

}  // namespace

CuptiSource::CuptiSource(CuptiApi* api, CuptiSourceOptions options)
    : api_(api),
      options_(std::move(options)),
      converter_(
          [api](CUpti_CallbackDomain d, uint32_t cbid) { return api->CallbackName(d, cbid); },
          options_.step_pattern) {
  CuptiSource* expected = nullptr;
  if (!g_source.compare_exchange_strong(expected, this)) {
    init_error_ = "another CUPTI source is active in this process";
    return;
  }
  if (const CUptiResult r = api_->RegisterCallbacks(&OnBufferRequested, &OnBufferCompleted);
      r != CUPTI_SUCCESS) {
    init_error_ = Describe("cuptiActivityRegisterCallbacks", r);
  }
}

CuptiSource::~CuptiSource() {
  CuptiSource* self = this;
  g_source.compare_exchange_strong(self, nullptr);
}

std::string CuptiSource::Describe(const char* call, CUptiResult result) {
  std::string text = common::StrCat("CUPTI ", call, ": ", api_->ResultName(result));
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    text +=
        " (another profiler holds CUPTI in this process: Nsight Systems, DCGM profiling, or "
        "torch.profiler; "
        "GPU activity cannot be captured while it does)";
  } else if (result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
    text +=
        " (the driver restricts GPU profiling to admin users: set "
        "NVreg_RestrictProfilingToAdminUsers=0 or run "
        "with CAP_SYS_ADMIN)";
  }
  return text;
}

void CuptiSource::ReadClockPair(GpuClockMap* clock) {
  uint64_t gpu = 0;
  const TimeNs before = options_.host_now != nullptr ? options_.host_now() : common::HostNowNs();
  if (api_->GetTimestamp(&gpu) != CUPTI_SUCCESS) return;
  const TimeNs after = options_.host_now != nullptr ? options_.host_now() : common::HostNowNs();
  // The host instant halfway across the read: the pair is good to half the read's length.
  if (clock != nullptr) {
    clock->Add(ClockPair{gpu, before + (after - before) / 2, (after - before + 1) / 2});
  }
}

void CuptiSource::OpenWindow(TimeNs host_now, EventBudget* budget, GpuClockMap* gpu_clock) {
  {
    absl::MutexLock lock(&mu_);
    budget_ = budget;
    gpu_clock_ = gpu_clock;
    cupti_dropped_ = 0;
    converter_.OpenWindow(host_now);
    error_ = init_error_;
  }
  if (!init_error_.empty()) return;
  if (const CUptiResult r = api_->Subscribe(&subscriber_, &IgnoreCallback, nullptr);
      r != CUPTI_SUCCESS) {
    subscriber_ = nullptr;
    absl::MutexLock lock(&mu_);
    error_ = Describe("cuptiSubscribe", r);
    return;
  }
  ReadClockPair(gpu_clock);
  for (CUpti_ActivityKind kind : kKinds) {
    const CUptiResult r = api_->Enable(kind);
    if (r == CUPTI_SUCCESS) {
      enabled_.push_back(kind);
      continue;
    }
    absl::MutexLock lock(&mu_);
    const std::string call = common::StrCat("cuptiActivityEnable(", KindName(kind), ")");
    common::StrAppend(&error_, error_.empty() ? "" : "; ", Describe(call.c_str(), r));
  }
  for (CUpti_CallbackId cbid : kLaunchCalls) {
    if (api_->EnableDriverApi(cbid, true) == CUPTI_SUCCESS) driver_calls_.push_back(cbid);
  }
}

void CuptiSource::CloseWindow(TimeNs host_now) {
  if (subscriber_ == nullptr) return;
  for (CUpti_ActivityKind kind : enabled_) api_->Disable(kind);
  for (CUpti_CallbackId cbid : driver_calls_) api_->EnableDriverApi(cbid, false);
  enabled_.clear();
  driver_calls_.clear();
  // Forced: hands over buffers still being filled, so nothing of the window stays behind.
  FlushAndReadClockPair(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  api_->Unsubscribe(subscriber_);
  subscriber_ = nullptr;
}

void CuptiSource::RequestBuffer(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;  // as many as fit
  absl::MutexLock lock(&mu_);
  std::unique_ptr<uint8_t[]> b;
  if (!free_.empty()) {
    b = std::move(free_.back());
    free_.pop_back();
  } else if (allocated_ < options_.buffers) {
    b.reset(new uint8_t[options_.buffer_bytes]);  // operator new aligns to 16; CUPTI wants 8
    ++allocated_;
  }
  if (!b) {
    ++refused_;
    *buffer = nullptr;
    *size = 0;
    return;
  }
  ++out_;
  *buffer = b.release();
  *size = options_.buffer_bytes;
}

void CuptiSource::CompleteBuffer(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                 size_t valid_size) {
  if (buffer == nullptr) return;
  size_t dropped = 0;
  if (api_->GetNumDroppedRecords(context, stream_id, &dropped) != CUPTI_SUCCESS) dropped = 0;
  absl::MutexLock lock(&mu_);
  cupti_dropped_ += dropped;
  CUpti_Activity* record = nullptr;
  while (valid_size > 0 && api_->GetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (budget_ == nullptr) continue;  // no window has been opened: nothing wants these
    if (!budget_->Take()) continue;
    converter_.Add(record);
  }
  std::unique_ptr<uint8_t[]> b(buffer);
  --out_;
  free_.push_back(std::move(b));
}

size_t CuptiSource::buffers_out() const {
  absl::MutexLock lock(&mu_);
  return out_;
}

uint64_t CuptiSource::buffers_refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

void CuptiSource::FlushAndReadClockPair(uint32_t flush_flag) {
  if (const CUptiResult r = api_->FlushAll(flush_flag); r != CUPTI_SUCCESS) {
    absl::MutexLock lock(&mu_);
    common::StrAppend(&error_, error_.empty() ? "" : "; ", Describe("cuptiActivityFlushAll", r));
  }
  GpuClockMap* gpu_clock = nullptr;
  {
    absl::MutexLock lock(&mu_);
    gpu_clock = gpu_clock_;
  }
  ReadClockPair(gpu_clock);
}

void CuptiSource::TakeInvalid(Harvest* h) {
  h->dropped_reasons = converter_.TakeDropped();
  for (const auto& [reason, n] : h->dropped_reasons) h->dropped += n;
}

Harvest CuptiSource::TakeRecorded() {
  if (subscriber_ == nullptr) return {};
  // Not forced: CUPTI hands over the buffers it has finished with and keeps filling the rest,
  // so the training process's kernels go on being recorded undisturbed. The pair read then maps
  // what is handed over by the line from the window's first pair to this one.
  FlushAndReadClockPair(0);
  absl::MutexLock lock(&mu_);
  static const GpuClockMap kIdentity;
  Harvest h;
  h.trace = converter_.TakeCompleted(gpu_clock_ != nullptr ? *gpu_clock_ : kIdentity);
  h.dropped = cupti_dropped_;
  cupti_dropped_ = 0;
  TakeInvalid(&h);
  return h;
}

Harvest CuptiSource::TakeHarvest() {
  absl::MutexLock lock(&mu_);
  Harvest h;
  static const GpuClockMap kIdentity;
  h.trace = converter_.Finish(gpu_clock_ != nullptr ? *gpu_clock_ : kIdentity);
  h.dropped = cupti_dropped_;
  TakeInvalid(&h);
  h.error = error_;
  cupti_dropped_ = 0;
  budget_ = nullptr;
  return h;
}

}  // namespace podscope::agent::probe
