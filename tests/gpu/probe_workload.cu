// A CUDA program with a known, logged launch count, for tests/gpu/run.sh: steps marked with NVTX
// ranges ("step N"), each launching 20 short kernels and a copy, for a given number of seconds.
// Every kernel launch's host time (CLOCK_REALTIME, ns) goes to LOG, one per line, so the check
// can count the launches that fell inside the capture window independently of the probe.
//
//   nvcc -O2 -o probe_workload tests/gpu/probe_workload.cu && ./probe_workload SECONDS LOG
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void podscope_workload_kernel(float* data, int n, int spins) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = data[i];
  for (int s = 0; s < spins; ++s) v = v * 0.999f + 0.001f;
  data[i] = v;
}

static long long NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: probe_workload SECONDS LOG\n");
    return 2;
  }
  const double seconds = std::atof(argv[1]);
  const int n = 1 << 20;
  float* device = nullptr;
  std::vector<float> host(n, 1.0f);
  if (cudaMalloc(&device, n * sizeof(float)) != cudaSuccess) return 1;
  cudaMemcpy(device, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  std::vector<long long> launches;
  launches.reserve(1 << 20);
  const long long end = NowNs() + static_cast<long long>(seconds * 1e9);
  long long step = 0;
  char name[64];
  while (NowNs() < end) {
    std::snprintf(name, sizeof(name), "step %lld", step);
    nvtxRangePushA(name);
    for (int k = 0; k < 20; ++k) {
      launches.push_back(NowNs());
      podscope_workload_kernel<<<(n + 255) / 256, 256>>>(device, n, 64);
    }
    cudaMemcpy(host.data(), device, 4096, cudaMemcpyDeviceToHost);
    cudaDeviceSynchronize();
    nvtxRangePop();
    ++step;
  }
  cudaFree(device);
  FILE* log = std::fopen(argv[2], "w");
  if (log == nullptr) return 1;
  for (long long t : launches) std::fprintf(log, "%lld\n", t);
  std::fclose(log);
  std::printf("probe_workload: %lld steps, %zu kernel launches\n", step, launches.size());
  return 0;
}
