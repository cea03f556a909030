// A stand-in for a training process on a machine without a GPU: it loads libpodscope_probe.so
// exactly as NCCL does (dlopen, then the newest table it knows, ncclProfiler_v6), makes a
// communicator, and runs "steps" that each issue two AllReduces through the plugin (kernel
// channels timed on the host clock, as a GPU's globaltimer is) and mark themselves with
// podscope/step.h. Through v6 each step also runs a copy-engine AllGather, as NCCL 2.29 may.
//
//   fake_training LIBRARY SOCKET RANK WORLD JOB SECONDS [KEY=VALUE,...]
//
// Keys, for watching:
//   barrier=PATH   ranks share a file: an AllReduce's "kernel" runs until every rank entered it,
//                  as NCCL's does, so a slow rank makes the others wait
//   compute-ms=N   the forward and backward pass [5]
//   slow=F         this rank's compute takes F times as long ...
//   slow-after=S   ... from S seconds into the run [0]
//   hang-at=S      this rank stops entering collectives S seconds into the run
//   marks=0        no step marks: the agent infers steps from the collectives
//   collectives=0  no collectives at all (a one-GPU job): the step marks are all there is
//   nvtx=1         mark steps with NVTX ranges "step N" (nvtxRangePushA / Pop), the probe as NVTX's
//                  injection library (NVTX_INJECTION64_PATH), instead of podscope/step.h
//   nccl=v5        use the v5 table, as NCCL before 2.29 does [v6]
#include <dlfcn.h>
#include <fcntl.h>
#include <nvtx3/nvToolsExt.h>
#include <podscope/step.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

#include "agent/probe/nccl_profiler_abi.h"
#include "common/parse_number.h"

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

// Every rank's newest collective entered (sequence + 1), in a file all ranks map.
uint64_t* g_barrier = nullptr;
int g_world = 1;

// Until every rank entered collective `seq`, or `deadline`; false at the deadline.
bool WaitForPeers(uint64_t seq, uint64_t deadline) {
  if (g_barrier == nullptr) return true;
  for (int r = 0; r < g_world; ++r) {
    while (__atomic_load_n(&g_barrier[r * 8], __ATOMIC_ACQUIRE) < seq + 1) {
      if (NowNs() >= deadline) return false;
      SleepUs(50);
    }
  }
  return true;
}

// False when a peer never came (the kernel never ends, as in a hang). `Profiler` is ProfilerV6 or
// ProfilerV5, `Descr` its event descriptor.
template <typename Profiler, typename Descr>
bool AllReduce(const Profiler& nccl, void* context, uint64_t seq, int rank, uint64_t deadline) {
  Descr coll{};
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
  void* channels[2] = {nullptr, nullptr};
  for (void*& ch_handle : channels) {
    Descr ch{};
    ch.type = kProfileKernelCh;
    ch.parentObj = handle;
    ch.kernelCh.pTimer = NowNs();
    nccl.startEvent(context, &ch_handle, &ch);
  }
  if (g_barrier != nullptr) __atomic_store_n(&g_barrier[rank * 8], seq + 1, __ATOMIC_RELEASE);
  if (!WaitForPeers(seq, deadline)) return false;
  SleepUs(2000);  // the transfer
  for (void* ch_handle : channels) {
    EventStateArgs args{};
    args.kernelCh.pTimer = NowNs();
    nccl.recordEventState(ch_handle, kKernelChStop, &args);
    nccl.stopEvent(ch_handle);
  }
  nccl.stopEvent(handle);
  return true;
}

// A copy-engine AllGather (v6): the collective, its sync and its batch, started and stopped; no
// kernel channel times it.
void CopyEngineAllGather(const ProfilerV6& nccl, void* context, uint64_t seq, int rank) {
  EventDescrV6 coll{};
  coll.type = kProfileCeColl;
  coll.rank = rank;
  coll.ceColl.seqNumber = seq;
  coll.ceColl.ceSeqNum = static_cast<uint32_t>(seq);
  coll.ceColl.func = "AllGather";
  coll.ceColl.count = 1 << 16;
  coll.ceColl.datatype = "ncclBfloat16";
  coll.ceColl.syncStrategy = "UC";
  void* handle = nullptr;
  nccl.startEvent(context, &handle, &coll);
  for (uint64_t type : {kProfileCeSync, kProfileCeBatch}) {
    EventDescrV6 part{};
    part.type = type;
    part.parentObj = handle;
    void* part_handle = nullptr;
    nccl.startEvent(context, &part_handle, &part);
    nccl.stopEvent(part_handle);
  }
  nccl.stopEvent(handle);
}

std::map<std::string, std::string> Options(const char* text) {
  std::map<std::string, std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr,
                 "usage: fake_training LIBRARY SOCKET RANK WORLD JOB SECONDS [KEY=VALUE,...]\n");
    return 2;
  }
  setenv("NCCL_PROFILER_PLUGIN", argv[1],
         1);  // what NCCL loads it by (and the step API finds it by)
  setenv("PODSCOPE_AGENT_SOCKET", argv[2], 1);
  setenv("PODSCOPE_PROBE_RECONNECT_MS", "100", 1);
  setenv("RANK", argv[3], 1);
  setenv("LOCAL_RANK", argv[3], 1);
  setenv("WORLD_SIZE", argv[4], 1);
  setenv("PODSCOPE_JOB", argv[5], 1);
  const int rank = static_cast<int>(podscope::common::ParseInt(argv[3]).value());
  g_world = static_cast<int>(podscope::common::ParseInt(argv[4]).value());
  const double seconds = podscope::common::ParseDouble(argv[6]).value();
  std::map<std::string, std::string> options =
      argc == 8 ? Options(argv[7]) : std::map<std::string, std::string>();
  const auto number = [&](const char* key, double fallback) {
    return options.contains(key) ? podscope::common::ParseDouble(options[key]).value() : fallback;
  };
  const double compute_ms = number("compute-ms", 5);
  const double slow = number("slow", 1);
  const double slow_after = number("slow-after", 0);
  const double hang_at = number("hang-at", -1);
  const bool marks = number("marks", 1) != 0;
  const bool collectives = number("collectives", 1) != 0;
  const bool nvtx = number("nvtx", 0) != 0;
  if (nvtx) setenv("NVTX_INJECTION64_PATH", argv[1], 1);  // read at the first NVTX call
  if (options.contains("barrier")) {
    const int fd = open(options["barrier"].c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 64 * 1024) != 0) {
      std::fprintf(stderr, "fake_training: cannot open the barrier file\n");
      return 1;
    }
    void* map = mmap(nullptr, 64 * 1024, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED || g_world * 8 * 8 > 64 * 1024) return 1;
    g_barrier = static_cast<uint64_t*>(map);
  }

  void* probe = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (probe == nullptr) {
    std::fprintf(stderr, "fake_training: %s\n", dlerror());
    return 1;
  }
  const bool v5 = options["nccl"] == "v5";
  const auto* v6_table =
      v5 ? nullptr : static_cast<const ProfilerV6*>(dlsym(probe, "ncclProfiler_v6"));
  const auto* v5_table =
      v5 ? static_cast<const ProfilerV5*>(dlsym(probe, "ncclProfiler_v5")) : nullptr;
  int mask = 0;
  void* context = nullptr;
  const int init = v6_table != nullptr
                       ? v6_table->init(&context, 0x5eed, &mask, "dp", 1, g_world, rank, nullptr)
                   : v5_table != nullptr
                       ? v5_table->init(&context, 0x5eed, &mask, "dp", 1, g_world, rank, nullptr)
                       : kNcclInternalError;
  if (init != kNcclSuccess) {
    std::fprintf(stderr, "fake_training: the plugin's init failed\n");
    return 1;
  }
  std::printf("fake_training rank %d running\n", rank);
  std::fflush(stdout);
  const uint64_t begin = NowNs();
  const uint64_t end = begin + static_cast<uint64_t>(seconds * 1e9);
  const auto elapsed = [&] { return static_cast<double>(NowNs() - begin) / 1e9; };
  const auto all_reduce = [&](uint64_t s) {
    return v6_table != nullptr
               ? AllReduce<ProfilerV6, EventDescrV6>(*v6_table, context, s, rank, end)
               : AllReduce<ProfilerV5, EventDescrV5>(*v5_table, context, s, rank, end);
  };
  uint64_t seq = 0;
  for (uint64_t step = 0; NowNs() < end; ++step) {
    char range[32];
    std::snprintf(range, sizeof(range), "step %llu", static_cast<unsigned long long>(step));
    if (marks && nvtx) nvtxRangePushA(range);
    if (marks && !nvtx) podscope_step_begin(step);
    SleepUs(static_cast<long>(compute_ms * (elapsed() >= slow_after ? slow : 1.0) *
                              1000));  // forward and backward
    if (hang_at >= 0 && elapsed() >= hang_at) {
      std::printf("fake_training rank %d hangs before collective %llu\n", rank,
                  static_cast<unsigned long long>(seq));
      std::fflush(stdout);
      while (NowNs() < end) SleepUs(100'000);
      break;
    }
    if (collectives) {
      if (!all_reduce(seq++) || !all_reduce(seq++)) break;
      if (v6_table != nullptr) CopyEngineAllGather(*v6_table, context, step, rank);
    }
    SleepUs(1000);  // optimizer
    if (marks && nvtx) nvtxRangePop();
    if (marks && !nvtx) podscope_step_end(step);
  }
  // Leave the probe a flush to report the last steps before NCCL's communicator goes.
  SleepUs(1'500'000);
  if (v6_table != nullptr) {
    v6_table->finalize(context);
  } else {
    v5_table->finalize(context);
  }
  return 0;
}
