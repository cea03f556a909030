// A CUPTI stand-in for tests: hands CuptiSource buffers the way CUPTI does (ask for a buffer,
// fill it, complete it), from records the test builds with CUPTI's own structs.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/probe/cupti_api.h"

namespace podscope::agent::probe::testing {

class FakeCupti : public CuptiApi {
 public:
  CUptiResult Subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc, void*) override {
    if (subscribe_result != CUPTI_SUCCESS) return subscribe_result;
    subscribed = true;
    *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(this);
    return CUPTI_SUCCESS;
  }
  CUptiResult Unsubscribe(CUpti_SubscriberHandle) override {
    subscribed = false;
    return CUPTI_SUCCESS;
  }
  CUptiResult RegisterCallbacks(BufferRequested r, BufferCompleted c) override {
    requested = r;
    completed = c;
    return CUPTI_SUCCESS;
  }
  CUptiResult Enable(CUpti_ActivityKind kind) override {
    if (kind == failing_kind) return enable_result;
    enabled.insert(kind);
    return CUPTI_SUCCESS;
  }
  CUptiResult Disable(CUpti_ActivityKind kind) override {
    enabled.erase(kind);
    return CUPTI_SUCCESS;
  }
  CUptiResult EnableDriverApi(CUpti_CallbackId cbid, bool enable) override {
    if (enable)
      driver_calls.insert(cbid);
    else
      driver_calls.erase(cbid);
    return CUPTI_SUCCESS;
  }
  CUptiResult FlushAll(uint32_t flag) override {
    flush_flags.push_back(flag);
    ++flushes;
    return CUPTI_SUCCESS;
  }
  CUptiResult GetTimestamp(uint64_t* timestamp) override {
    *timestamp = gpu_now;
    return CUPTI_SUCCESS;
  }
  CUptiResult GetNextRecord(uint8_t* buffer, size_t, CUpti_Activity** record) override {
    auto it = filled.find(buffer);
    if (it == filled.end() || it->second.empty()) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = const_cast<CUpti_Activity*>(it->second.front());
    it->second.erase(it->second.begin());
    return CUPTI_SUCCESS;
  }
  CUptiResult GetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) override {
    *dropped = next_dropped;
    next_dropped = 0;
    return CUPTI_SUCCESS;
  }
  std::string ResultName(CUptiResult result) override {
    switch (result) {
      case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        return "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
        return "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
      default:
        return "CUPTI error " + std::to_string(static_cast<int>(result));
    }
  }
  std::string CallbackName(CUpti_CallbackDomain domain, uint32_t cbid) override {
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 211) return "cudaLaunchKernel";
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == 307) return "cuLaunchKernel";
    return {};
  }

  // CUPTI asks for a buffer, fills it with `records` and hands it back, reporting `dropped`
  // records it could not keep. False when the source gave no buffer (the pool was empty).
  bool Deliver(std::vector<const CUpti_Activity*> records, size_t dropped = 0) {
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    requested(&buffer, &size, &max_records);
    if (buffer == nullptr) return false;
    filled[buffer] = std::move(records);
    next_dropped = dropped;
    completed(nullptr, 0, buffer, size, size);
    filled.erase(buffer);
    return true;
  }
  // Asks for a buffer and keeps it (CUPTI still filling it).
  uint8_t* Hold() {
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    requested(&buffer, &size, &max_records);
    return buffer;
  }

  BufferRequested requested = nullptr;
  BufferCompleted completed = nullptr;
  std::set<CUpti_ActivityKind> enabled;
  std::set<CUpti_CallbackId> driver_calls;
  CUptiResult subscribe_result = CUPTI_SUCCESS;
  CUpti_ActivityKind failing_kind = CUPTI_ACTIVITY_KIND_INVALID;
  CUptiResult enable_result = CUPTI_SUCCESS;
  bool subscribed = false;
  int flushes = 0;
  std::vector<uint32_t> flush_flags;
  uint64_t gpu_now = 0;
  size_t next_dropped = 0;
  std::map<uint8_t*, std::vector<const CUpti_Activity*>> filled;
};

}  // namespace podscope::agent::probe::testing
