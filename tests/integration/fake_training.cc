// A stand-in for a training process on a machine without a GPU: it loads libpodscope_probe.so
// exactly as NCCL does (dlopen, then the ncclProfiler_v5 table), makes a communicator, and runs
// "steps" that each issue two AllReduces through the plugin (kernel channels timed on the host
// clock, as a GPU's globaltimer is) and mark themselves with podscope/step.h.
//
//   fake_training LIBRARY SOCKET RANK WORLD JOB SECONDS
#include <dlfcn.h>
#include <podscope/step.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/probe/nccl_profiler_abi.h"

namespace {

using namespace podscope::agent::probe::nccl_abi;

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

void SleepUs(long us) {
  timespec t{0, us * 1000};
  nanosleep(&t, nullptr);
}

void AllReduce(const ProfilerV5& nccl, void* context, uint64_t seq, int rank) {
  EventDescrV5 coll{};
  coll.type = kProfileColl;
  coll.rank = rank;
  coll.coll.seqNumber = seq;
  coll.coll.func = "AllReduce";
  coll.coll.count = 1 << 20;
  coll.coll.datatype = "ncclBfloat16";
  coll.coll.nChannels = 2;
  coll.coll.algo = "RING";
  coll.coll.proto = "SIMPLE";
  void* handle = nullptr;
  nccl.startEvent(context, &handle, &coll);
  SleepUs(200);  // launch latency
  EventDescrV5 ch{};
  ch.type = kProfileKernelCh;
  ch.parentObj = handle;
  ch.kernelCh.pTimer = NowNs();
  void* ch_handle = nullptr;
  nccl.startEvent(context, &ch_handle, &ch);
  SleepUs(2000);  // the collective's kernel
  EventStateArgs args{};
  args.kernelCh.pTimer = NowNs();
  nccl.recordEventState(ch_handle, kKernelChStop, &args);
  nccl.stopEvent(ch_handle);
  nccl.stopEvent(handle);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: fake_training LIBRARY SOCKET RANK WORLD JOB SECONDS\n");
    return 2;
  }
  setenv("NCCL_PROFILER_PLUGIN", argv[1], 1);  // what NCCL loads it by (and the step API finds it by)
  setenv("PODSCOPE_AGENT_SOCKET", argv[2], 1);
  setenv("PODSCOPE_PROBE_RECONNECT_MS", "100", 1);
  setenv("RANK", argv[3], 1);
  setenv("LOCAL_RANK", argv[3], 1);
  setenv("WORLD_SIZE", argv[4], 1);
  setenv("PODSCOPE_JOB", argv[5], 1);
  const int rank = std::atoi(argv[3]);
  const double seconds = std::atof(argv[6]);

  void* probe = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (probe == nullptr) {
    std::fprintf(stderr, "fake_training: %s\n", dlerror());
    return 1;
  }
  const auto* nccl = static_cast<const ProfilerV5*>(dlsym(probe, "ncclProfiler_v5"));
  int mask = 0;
  void* context = nullptr;
  if (nccl == nullptr || nccl->init(&context, 0x5eed, &mask, "dp", 1, std::atoi(argv[4]), rank, nullptr) != kNcclSuccess) {
    std::fprintf(stderr, "fake_training: the plugin's init failed\n");
    return 1;
  }
  std::printf("fake_training rank %d running\n", rank);
  std::fflush(stdout);
  const uint64_t end = NowNs() + static_cast<uint64_t>(seconds * 1e9);
  uint64_t seq = 0;
  for (uint64_t step = 0; NowNs() < end; ++step) {
    podscope_step_begin(step);
    SleepUs(5000);  // forward and backward
    AllReduce(*nccl, context, seq++, rank);
    AllReduce(*nccl, context, seq++, rank);
    SleepUs(1000);  // optimizer
    podscope_step_end(step);
  }
  nccl->finalize(context);
  return 0;
}
