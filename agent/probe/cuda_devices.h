// The limits of the GPUs a training process uses, read from the CUDA driver the process already
// loaded (cuDeviceGetAttribute), as Kineto reads cudaGetDeviceProperties: what occupancy and SM
// efficiency are computed from (analysis/occupancy.h). The probe links nothing of
// CUDA's; it finds the driver's entry points in the process, or does without.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "common/worker_trace.h"

namespace podscope::agent::probe {

// cuda.h's driver calls the probe uses; tests pass their own.
struct CudaDeviceCalls {
  CUresult (*device_get)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*get_attribute)(int* value, CUdevice_attribute attribute, CUdevice device) = nullptr;
  CUresult (*get_name)(char* name, int length, CUdevice device) = nullptr;
  CUresult (*total_mem)(size_t* bytes, CUdevice device) = nullptr;
};

// The driver the process already loaded (libcuda.so.1, never loaded by the probe itself), or
// nullopt when there is none or it lacks a call.
std::optional<CudaDeviceCalls> FindCudaDriver();

// One record per ordinal (CUPTI's device id) the driver describes; one it refuses is left out,
// and a limit it refuses stays 0 (the compute capability's is used then).
std::vector<common::DeviceInfo> DescribeDevices(const CudaDeviceCalls& calls,
                                                const std::vector<int32_t>& ordinals);

}  // namespace podscope::agent::probe
