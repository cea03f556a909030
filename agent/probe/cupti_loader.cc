#include "agent/probe/cupti_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <string_view>
#include <vector>

#include "common/str_util.h"

namespace podscope::agent::probe {

namespace {

// Every CUPTI entry point the probe calls, resolved once.
struct CuptiSymbols {
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                    CUpti_BuffersCallbackCompleteFunc);
  CUptiResult (*enable)(CUpti_ActivityKind);
  CUptiResult (*disable)(CUpti_ActivityKind);
  CUptiResult (*enable_driver_api)(CUpti_CallbackId, uint8_t);
  CUptiResult (*flush_all)(uint32_t);
  CUptiResult (*get_timestamp)(uint64_t*);
  CUptiResult (*get_next_record)(uint8_t*, size_t, CUpti_Activity**);
  CUptiResult (*get_num_dropped)(CUcontext, uint32_t, size_t*);
  CUptiResult (*result_string)(CUptiResult, const char**);
  CUptiResult (*callback_name)(CUpti_CallbackDomain, uint32_t, const char**);
};

class LoadedCupti : public CuptiApi {
 public:
  // `handle` is never closed: CUPTI stays loaded for the life of the process.
  LoadedCupti(void* handle, std::string path, CuptiSymbols s) : path_(std::move(path)), s_(s) {}
  // The library stays loaded: CUPTI cannot be unloaded from a process it has instrumented.

  CUptiResult Subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                        void* user_data) override {
    return s_.subscribe(subscriber, callback, user_data);
  }
  CUptiResult Unsubscribe(CUpti_SubscriberHandle subscriber) override {
    return s_.unsubscribe(subscriber);
  }
  CUptiResult RegisterCallbacks(BufferRequested requested, BufferCompleted completed) override {
    return s_.register_callbacks(requested, completed);
  }
  CUptiResult Enable(CUpti_ActivityKind kind) override { return s_.enable(kind); }
  CUptiResult Disable(CUpti_ActivityKind kind) override { return s_.disable(kind); }
  CUptiResult EnableDriverApi(CUpti_CallbackId cbid, bool enable) override {
    return s_.enable_driver_api(cbid, enable ? 1 : 0);
  }
  CUptiResult FlushAll(uint32_t flag) override { return s_.flush_all(flag); }
  CUptiResult GetTimestamp(uint64_t* timestamp) override { return s_.get_timestamp(timestamp); }
  CUptiResult GetNextRecord(uint8_t* buffer, size_t valid_size, CUpti_Activity** record) override {
    return s_.get_next_record(buffer, valid_size, record);
  }
  CUptiResult GetNumDroppedRecords(CUcontext context, uint32_t stream_id,
                                   size_t* dropped) override {
    return s_.get_num_dropped(context, stream_id, dropped);
  }
  std::string ResultName(CUptiResult result) override {
    const char* text = nullptr;
    if (s_.result_string(result, &text) == CUPTI_SUCCESS && text != nullptr) return text;
    return common::StrCat("CUPTI error ", static_cast<int>(result));
  }
  std::string CallbackName(CUpti_CallbackDomain domain, uint32_t cbid) override {
    const char* name = nullptr;
    if (s_.callback_name(domain, cbid, &name) == CUPTI_SUCCESS && name != nullptr) return name;
    return {};
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  CuptiSymbols s_;
};

// The directory of the CUDA runtime this process loaded, if any ("" otherwise).
std::string CudaRuntimeDirectory() {
  std::string dir;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string_view name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (name.find("libcudart.so") == std::string_view::npos) return 0;
        const size_t slash = name.rfind('/');
        if (slash != std::string_view::npos)
          *static_cast<std::string*>(out) = std::string(name.substr(0, slash));
        return 1;
      },
      &dir);
  return dir;
}

template <typename F>
bool Resolve(void* handle, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (*out == nullptr && missing->empty()) *missing = name;
  return *out != nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CuptiApi>> LoadCupti(const std::string& explicit_path) {
  std::vector<std::string> candidates;
  if (!explicit_path.empty()) {
    candidates.push_back(explicit_path);
  } else {
    candidates = {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
                  "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"};
    if (const std::string dir = CudaRuntimeDirectory(); !dir.empty()) {
      // pip's nvidia-cuda-cupti keeps it in .../nvidia/cuda_cupti/lib beside .../cuda_runtime/lib.
      candidates.push_back(dir + "/libcupti.so.13");
      candidates.push_back(dir + "/../../cuda_cupti/lib/libcupti.so.13");
    }
  }
  std::string tried;
  for (const std::string& path : candidates) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      common::StrAppend(&tried, tried.empty() ? "" : "; ", dlerror());
      continue;
    }
    CuptiSymbols s{};
    std::string missing;
    Resolve(handle, "cuptiSubscribe", &s.subscribe, &missing);
    Resolve(handle, "cuptiUnsubscribe", &s.unsubscribe, &missing);
    Resolve(handle, "cuptiActivityRegisterCallbacks", &s.register_callbacks, &missing);
    Resolve(handle, "cuptiActivityEnable", &s.enable, &missing);
    Resolve(handle, "cuptiActivityDisable", &s.disable, &missing);
    Resolve(handle, "cuptiActivityEnableDriverApi", &s.enable_driver_api, &missing);
    Resolve(handle, "cuptiActivityFlushAll", &s.flush_all, &missing);
    Resolve(handle, "cuptiGetTimestamp", &s.get_timestamp, &missing);
    Resolve(handle, "cuptiActivityGetNextRecord", &s.get_next_record, &missing);
    Resolve(handle, "cuptiActivityGetNumDroppedRecords", &s.get_num_dropped, &missing);
    Resolve(handle, "cuptiGetResultString", &s.result_string, &missing);
    Resolve(handle, "cuptiGetCallbackName", &s.callback_name, &missing);
    if (!missing.empty()) {
      return absl::FailedPreconditionError(common::StrCat(
          path, " lacks ", missing, ": a CUPTI older than CUDA 12.x? the probe needs CUPTI 13"));
    }
    char real[4096] = {0};
    if (dlinfo(handle, RTLD_DI_ORIGIN, real) != 0) real[0] = '\0';
    std::string origin =
        real[0] != '\0' ? common::StrCat(real, "/", path.substr(path.rfind('/') + 1)) : path;
    return std::unique_ptr<CuptiApi>(new LoadedCupti(handle, std::move(origin), s));
  }
  return absl::NotFoundError(
      common::StrCat("no CUPTI library found (set PODSCOPE_CUPTI_PATH): ", tried));
}

std::string LoadedCuptiPath(const CuptiApi& api) {
  const auto* loaded = dynamic_cast<const LoadedCupti*>(&api);
  return loaded != nullptr ? loaded->path() : std::string();
}

}  // namespace podscope::agent::probe
