// CUPTI activity records, built by hand as CUDA 13's CUPTI lays them out, through the converter:
// every field the trace model keeps, the names, the pairing of NVTX ranges into steps, the
// external ids, the devices of sync records, and the move onto the host clock.
#include "agent/probe/cupti_records.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace podscope::agent::probe {
namespace {

constexpr uint64_t kGpuBase = 5'000'000'000;
constexpr TimeNs kHostBase = 1'800'000'000'000'000'000;

std::string NameOf(CUpti_CallbackDomain domain, uint32_t cbid) {
  return domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 211 ? "cudaLaunchKernel" : "";
}

class CuptiRecordsTest : public ::testing::Test {
 protected:
  CuptiRecordsTest() : converter_(&NameOf, "^(ProfilerStep#|[Ss]tep[ _#]?)([0-9]+)$") {
    clock_.Add(ClockPair{kGpuBase, kHostBase});  // one pair: a pure offset
  }
  template <typename Record>
  static Record Blank(CUpti_ActivityKind kind) {
    Record r;
    std::memset(&r, 0, sizeof(r));
    r.kind = kind;
    return r;
  }
  bool Add(const void* record) {
    return converter_.Add(static_cast<const CUpti_Activity*>(record));
  }
  static TimeNs Host(uint64_t gpu) { return kHostBase + static_cast<TimeNs>(gpu - kGpuBase); }
  // An NVTX range's start or end mark on thread 55.
  void Mark(uint32_t id, uint64_t at, CUpti_ActivityFlag flag, const char* name) {
    auto m = Blank<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
    m.id = id;
    m.timestamp = at;
    m.flags = flag;
    m.name = name;
    m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    m.objectId.pt.threadId = 55;
    EXPECT_TRUE(Add(&m));
  }

  CuptiRecordConverter converter_;
  GpuClockMap clock_;
};

TEST_F(CuptiRecordsTest, AKernelKeepsItsLaunchShapeAndIsNamedDemangled) {
  auto k = Blank<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.start = kGpuBase + 100;
  k.end = kGpuBase + 350;
  k.deviceId = 3;
  k.contextId = 9;
  k.streamId = 7;
  k.correlationId = 42;
  k.gridX = 132, k.gridY = 2, k.gridZ = 1;
  k.blockX = 128, k.blockY = 1, k.blockZ = 1;
  k.registersPerThread = 96;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 40960;
  k.name = "_Z4gemmPfS_i";
  ASSERT_TRUE(Add(&k));
  auto nccl = k;
  nccl.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  nccl.correlationId = 43;
  ASSERT_TRUE(Add(&nccl));
  EXPECT_EQ(converter_.records(), 2u);
  const common::WorkerTrace t = converter_.Finish(clock_);
  ASSERT_EQ(t.kernels.size(), 2u);
  EXPECT_EQ(t.kernels.start[0], Host(kGpuBase + 100));
  EXPECT_EQ(t.kernels.end[0], Host(kGpuBase + 350));
  EXPECT_EQ(t.kernels.device[0], 3);
  EXPECT_EQ(t.kernels.stream[0], 7);
  EXPECT_EQ(t.kernels.correlation[0], 42);
  EXPECT_EQ(t.strings.Get(t.kernels.name[0]), "gemm(float*, float*, int)");
  EXPECT_EQ(t.kernels.grid_x[0], 132u);
  EXPECT_EQ(t.kernels.grid_y[0], 2u);
  EXPECT_EQ(t.kernels.block_x[0], 128u);
  EXPECT_EQ(t.kernels.registers_per_thread[0], 96);
  EXPECT_EQ(t.kernels.shared_memory_bytes[0], 1024 + 40960) << "static and dynamic together";
  EXPECT_EQ(t.kernels.kernel_class[0], common::KernelClass::kCompute);
  EXPECT_EQ(t.kernels.kernel_class[1], common::KernelClass::kCommunication);
  EXPECT_TRUE(t.Validate().ok()) << t.Validate();
  EXPECT_EQ(converter_.records(), 0u) << "Finish starts over";
}

TEST_F(CuptiRecordsTest, CopiesAndSetsCarryTheirKindAndBytes) {
  auto copy = Blank<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  copy.start = kGpuBase + 10;
  copy.end = kGpuBase + 20;
  copy.bytes = 4096;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.deviceId = 1;
  ASSERT_TRUE(Add(&copy));
  auto peer = Blank<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2);
  peer.start = kGpuBase + 30;
  peer.end = kGpuBase + 40;
  peer.bytes = 8192;
  ASSERT_TRUE(Add(&peer));
  auto set = Blank<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  set.start = kGpuBase + 50;
  set.end = kGpuBase + 55;
  set.bytes = 64;
  ASSERT_TRUE(Add(&set));
  const common::WorkerTrace t = converter_.Finish(clock_);
  ASSERT_EQ(t.memcpys.size(), 3u);
  EXPECT_EQ(t.memcpys.kind[0], common::MemcpyKind::kHostToDevice);
  EXPECT_EQ(t.memcpys.bytes[0], 4096);
  EXPECT_EQ(t.memcpys.kind[1], common::MemcpyKind::kPeerToPeer);
  EXPECT_EQ(t.memcpys.bytes[1], 8192);
  EXPECT_EQ(t.memcpys.kind[2], common::MemcpyKind::kMemset);
  EXPECT_EQ(t.memcpys.start[2], Host(kGpuBase + 50));
}

TEST_F(CuptiRecordsTest, ApiCallsAreNamedAndTakeTheirFrameworkOpsExternalId) {
  auto launch = Blank<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  launch.start = kGpuBase + 1;
  launch.end = kGpuBase + 4;
  launch.cbid = 211;
  launch.correlationId = 42;
  launch.threadId = 777;
  ASSERT_TRUE(Add(&launch));
  auto driver = Blank<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  driver.cbid = 17;
  driver.correlationId = 43;
  driver.start = kGpuBase + 5;
  driver.end = kGpuBase + 9;
  ASSERT_TRUE(Add(&driver));
  auto external =
      Blank<CUpti_ActivityExternalCorrelation>(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  external.correlationId = 42;
  external.externalId = 9001;
  ASSERT_TRUE(Add(&external));
  const common::WorkerTrace t = converter_.Finish(clock_);
  ASSERT_EQ(t.runtime_calls.size(), 2u);
  EXPECT_EQ(t.strings.Get(t.runtime_calls.name[0]), "cudaLaunchKernel");
  EXPECT_EQ(t.runtime_calls.thread[0], 777);
  EXPECT_EQ(t.runtime_calls.external_id[0], 9001);
  EXPECT_EQ(t.runtime_calls.api_kind[0], common::ApiKind::kRuntime);
  EXPECT_EQ(t.strings.Get(t.runtime_calls.name[1]), "driver api 17") << "no name known: its id";
  EXPECT_EQ(t.runtime_calls.external_id[1], 0);
  EXPECT_EQ(t.runtime_calls.api_kind[1], common::ApiKind::kDriver);
}

TEST_F(CuptiRecordsTest, NvtxRangesBecomeSpansAndStepRangesSteps) {
  Mark(1, kGpuBase + 100, CUPTI_ACTIVITY_FLAG_MARKER_START, "ProfilerStep#12");
  Mark(2, kGpuBase + 110, CUPTI_ACTIVITY_FLAG_MARKER_START, "forward");
  Mark(2, kGpuBase + 150, CUPTI_ACTIVITY_FLAG_MARKER_END, nullptr);
  Mark(1, kGpuBase + 400, CUPTI_ACTIVITY_FLAG_MARKER_END, nullptr);
  Mark(3, kGpuBase + 500, CUPTI_ACTIVITY_FLAG_MARKER_END, nullptr);  // opened before the window
  const common::WorkerTrace t = converter_.Finish(clock_);
  ASSERT_EQ(t.host_spans.size(), 2u);
  EXPECT_EQ(t.strings.Get(t.host_spans.name[0]), "forward");
  EXPECT_EQ(t.host_spans.step[0], common::kNoStep);
  EXPECT_EQ(t.host_spans.thread[0], 55);
  EXPECT_EQ(t.strings.Get(t.host_spans.name[1]), "ProfilerStep#12");
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(t.steps.number[0], 12);
  EXPECT_EQ(t.steps.start[0], Host(kGpuBase + 100));
  EXPECT_EQ(t.steps.end[0], Host(kGpuBase + 400));
}

// A window streamed in pieces: what a take hands over is final, and what is still open (an NVTX
// range, a framework op whose id came before its call) carries over to a later take.
TEST_F(CuptiRecordsTest, ATakeWhileTheWindowRunsKeepsWhatIsStillOpenForTheNext) {
  auto launch = [&](uint32_t correlation, uint64_t at) {
    auto a = Blank<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
    a.start = at;
    a.end = at + 3;
    a.cbid = 211;
    a.correlationId = correlation;
    EXPECT_TRUE(Add(&a));
  };
  Mark(1, kGpuBase + 100, CUPTI_ACTIVITY_FLAG_MARKER_START, "ProfilerStep#7");
  launch(41, kGpuBase + 120);
  auto external =
      Blank<CUpti_ActivityExternalCorrelation>(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  external.correlationId = 42;  // the op of a call that comes in the next piece
  external.externalId = 9002;
  ASSERT_TRUE(Add(&external));
  const common::WorkerTrace first = converter_.TakeCompleted(clock_);
  ASSERT_EQ(first.runtime_calls.size(), 1u);
  EXPECT_EQ(first.runtime_calls.start[0], Host(kGpuBase + 120));
  EXPECT_EQ(first.strings.Get(first.runtime_calls.name[0]), "cudaLaunchKernel");
  EXPECT_EQ(first.steps.size(), 0u) << "the step is still open";

  launch(42, kGpuBase + 300);
  Mark(1, kGpuBase + 400, CUPTI_ACTIVITY_FLAG_MARKER_END, nullptr);
  const common::WorkerTrace second = converter_.Finish(clock_);
  ASSERT_EQ(second.runtime_calls.size(), 1u);
  EXPECT_EQ(second.strings.Get(second.runtime_calls.name[0]), "cudaLaunchKernel")
      << "names are interned again into the new piece's strings";
  EXPECT_EQ(second.runtime_calls.external_id[0], 9002);
  ASSERT_EQ(second.steps.size(), 1u);
  EXPECT_EQ(second.steps.number[0], 7);
  EXPECT_EQ(second.steps.start[0], Host(kGpuBase + 100));
  EXPECT_EQ(second.steps.end[0], Host(kGpuBase + 400));
  // Finish starts over: a range left open does not reach the next window.
  Mark(2, kGpuBase + 500, CUPTI_ACTIVITY_FLAG_MARKER_START, "ProfilerStep#8");
  EXPECT_EQ(converter_.Finish(clock_).steps.size(), 0u);
  Mark(2, kGpuBase + 600, CUPTI_ACTIVITY_FLAG_MARKER_END, nullptr);
  EXPECT_EQ(converter_.Finish(clock_).steps.size(), 0u);
}

TEST_F(CuptiRecordsTest, SyncRecordsTakeTheDeviceOfTheirContextAndDeviceMemoryIsKept) {
  auto k = Blank<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_KERNEL);
  k.deviceId = 2;
  k.contextId = 5;
  k.name = "k";
  k.start = kGpuBase + 10;
  k.end = kGpuBase + 20;
  ASSERT_TRUE(Add(&k));
  auto sync = Blank<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  sync.contextId = 5;
  sync.streamId = UINT32_MAX;
  sync.start = kGpuBase + 20;
  sync.end = kGpuBase + 30;
  ASSERT_TRUE(Add(&sync));
  auto alloc = Blank<CUpti_ActivityMemory4>(CUPTI_ACTIVITY_KIND_MEMORY2);
  alloc.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  alloc.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  alloc.bytes = 1 << 20;
  alloc.deviceId = 2;
  alloc.timestamp = kGpuBase + 7;
  ASSERT_TRUE(Add(&alloc));
  auto release = alloc;
  release.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  ASSERT_TRUE(Add(&release));
  auto host = alloc;
  host.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;  // not device memory: skipped
  ASSERT_TRUE(Add(&host));
  auto unknown = Blank<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_OVERHEAD);
  EXPECT_FALSE(Add(&unknown)) << "a kind the probe never asks for";
  const common::WorkerTrace t = converter_.Finish(clock_);
  ASSERT_EQ(t.kernels.size(), 2u);
  EXPECT_EQ(t.kernels.kernel_class[1], common::KernelClass::kSync);
  EXPECT_EQ(t.kernels.device[1], 2) << "from the context a kernel ran in";
  EXPECT_EQ(t.kernels.stream[1], -1);
  ASSERT_EQ(t.memory_events.size(), 2u);
  EXPECT_EQ(t.memory_events.bytes[0], 1 << 20);
  EXPECT_EQ(t.memory_events.bytes[1], -(1 << 20));
  EXPECT_EQ(t.memory_events.time[0], Host(kGpuBase + 7));
}

}  // namespace
}  // namespace podscope::agent::probe
