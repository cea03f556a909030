#include "agent/probe/cuda_devices.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

namespace podscope::agent::probe {
namespace {

// A driver with one H100 at ordinal 0; ordinal 1 does not exist, and the opt-in shared memory
// attribute fails (as an old driver's would).
CUresult DeviceGet(CUdevice* device, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 40;
  return CUDA_SUCCESS;
}
CUresult GetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  static const std::map<CUdevice_attribute, int> kH100 = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472},
  };
  if (device != 40) return CUDA_ERROR_INVALID_DEVICE;
  const auto it = kH100.find(attribute);
  if (it == kH100.end()) return CUDA_ERROR_INVALID_VALUE;
  *value = it->second;
  return CUDA_SUCCESS;
}
CUresult GetName(char* name, int length, CUdevice) {
  std::strncpy(name, "NVIDIA H100 80GB HBM3", static_cast<size_t>(length));
  return CUDA_SUCCESS;
}
CUresult TotalMem(size_t* bytes, CUdevice) {
  *bytes = size_t{85'045'870'592};
  return CUDA_SUCCESS;
}

TEST(CudaDevicesTest, TheDriversAttributesBecomeTheDeviceRecord) {
  const CudaDeviceCalls calls{&DeviceGet, &GetAttribute, &GetName, &TotalMem};
  const std::vector<common::DeviceInfo> devices = DescribeDevices(calls, {0, 1});
  ASSERT_EQ(devices.size(), 1u);  // ordinal 1 is refused
  const common::DeviceInfo& d = devices[0];
  EXPECT_EQ(d.id, 0);
  EXPECT_EQ(d.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d.total_memory_bytes, 85'045'870'592);
  EXPECT_EQ(d.compute_major, 9);
  EXPECT_EQ(d.compute_minor, 0);
  EXPECT_EQ(d.sm_count, 132);
  EXPECT_EQ(d.max_threads_per_sm, 2048);
  EXPECT_EQ(d.max_threads_per_block, 1024);
  EXPECT_EQ(d.registers_per_sm, 65536);
  EXPECT_EQ(d.registers_per_block, 65536);
  EXPECT_EQ(d.shared_memory_per_sm, 233472);
  EXPECT_EQ(d.shared_memory_per_block_optin, 0);  // refused: the compute capability's is used
}

// This test process never loaded a CUDA driver, and the probe never loads one itself.
TEST(CudaDevicesTest, NoDriverInTheProcessMeansNoDescription) {
  EXPECT_FALSE(FindCudaDriver().has_value());
}

}  // namespace
}  // namespace podscope::agent::probe
