// GPU smoke check for the CUPTI path (not part of CI: run by tests/gpu/run.sh on a GPU
// machine). Enables the Activity API for kernels and memcpys, launches a known number of
// kernels, flushes, and checks that CUPTI delivered exactly that many kernel records, with no
// record dropped. Prints the GPU <-> host timestamp pair the probe uses to align its clocks.
//   nvcc -O2 -o cupti_smoke tests/gpu/cupti_smoke.cu -lcupti && ./cupti_smoke [kernels]
#include <cuda_runtime.h>
#include <cupti.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

std::atomic<long> kernels{0}, memcpys{0}, dropped{0};

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8 << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) ++kernels;
    if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) ++memcpys;
  }
  size_t n = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, stream, &n) == CUPTI_SUCCESS) dropped += static_cast<long>(n);
  free(buffer);
}

__global__ void Work(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 1.0001f + 1.0f;
}

#define CHECK(call)                                                                  \
  do {                                                                               \
    if (auto rc = (call); rc != 0) {                                                 \
      std::fprintf(stderr, "%s failed: %d\n", #call, static_cast<int>(rc));          \
      return 2;                                                                      \
    }                                                                                \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 1000;
  CHECK(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  const int n = 1 << 20;
  float* x = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMemset(x, 0, n * sizeof(float)));
  const auto begin = std::chrono::steady_clock::now();
  for (int k = 0; k < launches; ++k) Work<<<(n + 255) / 256, 256>>>(x, n);
  float back = 0;
  CHECK(cudaMemcpy(&back, x, sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaDeviceSynchronize());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  uint64_t gpu_ns = 0;
  CHECK(cuptiGetTimestamp(&gpu_ns));
  const auto host_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  CHECK(cudaFree(x));
  std::printf("launched %d kernels in %.1f ms; CUPTI: %ld kernel records, %ld memcpy records, %ld dropped\n", launches, ms,
              kernels.load(), memcpys.load(), dropped.load());
  std::printf("clock pair: cupti %llu ns, host %lld ns (difference %lld ns)\n", static_cast<unsigned long long>(gpu_ns),
              static_cast<long long>(host_ns), static_cast<long long>(host_ns) - static_cast<long long>(gpu_ns));
  const bool ok = kernels.load() == launches && memcpys.load() >= 1 && dropped.load() == 0;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
