// The slice of CUPTI the probe uses, behind an interface: the real one is loaded with dlopen
// (cupti_loader.h) so the probe has no link-time dependency on libcupti, and tests put a fake
// behind it that hands out recorded or synthetic activity buffers (no GPU needed).
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>

namespace podscope::agent::probe {

class CuptiApi {
 public:
  using BufferRequested = void (*)(uint8_t** buffer, size_t* size, size_t* max_records);
  using BufferCompleted = void (*)(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                   size_t size, size_t valid_size);

  virtual ~CuptiApi() = default;
  virtual CUptiResult Subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                void* user_data) = 0;
  virtual CUptiResult Unsubscribe(CUpti_SubscriberHandle subscriber) = 0;
  virtual CUptiResult RegisterCallbacks(BufferRequested requested, BufferCompleted completed) = 0;
  virtual CUptiResult Enable(CUpti_ActivityKind kind) = 0;
  virtual CUptiResult Disable(CUpti_ActivityKind kind) = 0;
  virtual CUptiResult EnableDriverApi(CUpti_CallbackId cbid, bool enable) = 0;
  virtual CUptiResult FlushAll(uint32_t flag) = 0;
  virtual CUptiResult GetTimestamp(uint64_t* timestamp) = 0;
  virtual CUptiResult GetNextRecord(uint8_t* buffer, size_t valid_size,
                                    CUpti_Activity** record) = 0;
  virtual CUptiResult GetNumDroppedRecords(CUcontext context, uint32_t stream_id,
                                           size_t* dropped) = 0;
  // "CUPTI_ERROR_..." for a result; the number when CUPTI does not know it.
  virtual std::string ResultName(CUptiResult result) = 0;
  // The API's name for a runtime or driver callback id ("cudaLaunchKernel"); empty if unknown.
  virtual std::string CallbackName(CUpti_CallbackDomain domain, uint32_t cbid) = 0;
};

}  // namespace podscope::agent::probe
