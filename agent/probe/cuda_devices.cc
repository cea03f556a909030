#include "agent/probe/cuda_devices.h"

#include <dlfcn.h>

#include <cstring>

namespace podscope::agent::probe {

std::optional<CudaDeviceCalls> FindCudaDriver() {
  // RTLD_NOLOAD: only a driver the process loaded; the handle is kept for the process's life.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (driver == nullptr) return std::nullopt;
  CudaDeviceCalls calls;
  calls.device_get = reinterpret_cast<decltype(calls.device_get)>(dlsym(driver, "cuDeviceGet"));
  calls.get_attribute =
      reinterpret_cast<decltype(calls.get_attribute)>(dlsym(driver, "cuDeviceGetAttribute"));
  calls.get_name = reinterpret_cast<decltype(calls.get_name)>(dlsym(driver, "cuDeviceGetName"));
  calls.total_mem =
      reinterpret_cast<decltype(calls.total_mem)>(dlsym(driver, "cuDeviceTotalMem_v2"));
  if (calls.device_get == nullptr || calls.get_attribute == nullptr || calls.get_name == nullptr ||
      calls.total_mem == nullptr) {
    return std::nullopt;
  }
  return calls;
}

std::vector<common::DeviceInfo> DescribeDevices(const CudaDeviceCalls& calls,
                                                const std::vector<int32_t>& ordinals) {
  std::vector<common::DeviceInfo> out;
  for (int32_t ordinal : ordinals) {
    CUdevice device = 0;
    if (calls.device_get(&device, ordinal) != CUDA_SUCCESS) continue;
    const auto attribute = [&](CUdevice_attribute a) {
      int value = 0;
      return calls.get_attribute(&value, a, device) == CUDA_SUCCESS && value > 0 ? value : 0;
    };
    common::DeviceInfo d;
    d.id = ordinal;
    char name[256] = {};
    if (calls.get_name(name, sizeof(name) - 1, device) == CUDA_SUCCESS)
      d.name.assign(name, strnlen(name, sizeof(name)));
    size_t bytes = 0;
    if (calls.total_mem(&bytes, device) == CUDA_SUCCESS)
      d.total_memory_bytes = static_cast<int64_t>(bytes);
    d.compute_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    d.compute_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    d.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    d.max_threads_per_sm = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    d.max_threads_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    d.registers_per_sm = attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    d.registers_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    d.shared_memory_per_sm = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    d.shared_memory_per_block_optin =
        attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace podscope::agent::probe
