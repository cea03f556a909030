// CuptiSource and the record converter, fed CUDA 13's record structs through a fake CUPTI.
#include "agent/probe/cupti_source.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/agent/probe/fake_cupti.h"

namespace podscope::agent::probe {
namespace {

using testing::FakeCupti;

TimeNs g_host = 0;
TimeNs FakeHostNow() { return g_host; }

CUpti_ActivityKernel10 Kernel(uint64_t start, uint64_t end, const char* name,
                              uint32_t correlation) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.deviceId = 3;
  k.contextId = 1;
  k.streamId = 7;
  k.name = name;
  k.correlationId = correlation;
  k.gridX = 128, k.gridY = 2, k.gridZ = 1, k.blockX = 256, k.blockY = 1, k.blockZ = 1;
  k.registersPerThread = 32;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 2048;
  return k;
}

class CuptiSourceTest : public ::testing::Test {
 protected:
  CuptiSourceTest() {
    options_.buffers = 2;
    options_.buffer_bytes = 4096;
    options_.step_pattern = "^(ProfilerStep#|[Ss]tep[ _#]?)([0-9]+)$";
    options_.host_now = &FakeHostNow;
  }
  // Opens a window at host 1'000'000 with the GPU clock 5 us ahead, closes it at 2'000'000.
  void Open(CuptiSource& source, uint64_t max_events = 100) {
    g_host = 1'000'000;
    cupti_.gpu_now = 1'005'000;
    budget_.Reset(max_events);
    source.OpenWindow(g_host, &budget_, &clock_);
  }
  void Close(CuptiSource& source) {
    g_host = 2'000'000;
    cupti_.gpu_now = 2'005'000;
    source.CloseWindow(g_host);
  }

  FakeCupti cupti_;
  CuptiSourceOptions options_;
  EventBudget budget_;
  GpuClockMap clock_;
};

TEST_F(CuptiSourceTest, RecordsOnlyInsideTheWindowAndMapsEveryKindOntoTheHostClock) {
  CuptiSource source(&cupti_, options_);
  ASSERT_NE(cupti_.requested, nullptr);
  EXPECT_TRUE(cupti_.enabled.empty()) << "nothing of CUPTI is on before a window";
  Open(source);
  EXPECT_TRUE(cupti_.subscribed);
  EXPECT_EQ(cupti_.enabled.size(), 9u);
  EXPECT_TRUE(cupti_.enabled.contains(CUPTI_ACTIVITY_KIND_MEMORY2));
  EXPECT_TRUE(cupti_.enabled.contains(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  EXPECT_TRUE(cupti_.enabled.contains(CUPTI_ACTIVITY_KIND_MARKER));
  EXPECT_TRUE(cupti_.driver_calls.contains(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));

  const CUpti_ActivityKernel10 k1 = Kernel(1'105'000, 1'115'000, "_Z5myAddPfS_i", 41);
  const CUpti_ActivityKernel10 k2 =
      Kernel(1'120'000, 1'125'000, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 42);
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.bytes = 1 << 20;
  copy.start = 1'130'000;
  copy.end = 1'140'000;
  copy.deviceId = 3;
  copy.streamId = 7;
  copy.correlationId = 43;
  CUpti_ActivityMemset4 memset{};
  memset.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  memset.bytes = 512;
  memset.start = 1'141'000;
  memset.end = 1'142'000;
  CUpti_ActivityAPI launch{};
  launch.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  launch.cbid = 211;
  launch.start = 1'100'000;
  launch.end = 1'104'000;
  launch.threadId = 555;
  launch.correlationId = 41;
  CUpti_ActivityExternalCorrelation external{};
  external.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  external.externalId = 9001;
  external.correlationId = 41;
  CUpti_ActivitySynchronization2 sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  sync.start = 1'150'000;
  sync.end = 1'160'000;
  sync.contextId = 1;
  sync.streamId = 7;
  CUpti_ActivityMarker2 step_start{}, step_end{}, other_start{}, other_end{};
  step_start.kind = step_end.kind = other_start.kind = other_end.kind = CUPTI_ACTIVITY_KIND_MARKER;
  step_start.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  step_start.id = 5;
  step_start.timestamp = 1'050'000;
  step_start.name = "step 12";
  step_start.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  step_start.objectId.pt.threadId = 555;
  step_end.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  step_end.id = 5;
  step_end.timestamp = 1'905'000;
  other_start = step_start;
  other_start.id = 6;
  other_start.name = "forward";
  other_end = step_end;
  other_end.id = 6;
  other_end.timestamp = 1'500'000;

  ASSERT_TRUE(cupti_.Deliver({reinterpret_cast<const CUpti_Activity*>(&launch),
                              reinterpret_cast<const CUpti_Activity*>(&k1),
                              reinterpret_cast<const CUpti_Activity*>(&k2),
                              reinterpret_cast<const CUpti_Activity*>(&copy),
                              reinterpret_cast<const CUpti_Activity*>(&memset)}));
  // Device memory: 64 MiB taken, then 16 MiB given back; pinned host memory is not device memory.
  CUpti_ActivityMemory4 taken{}, given{}, pinned{};
  taken.kind = given.kind = pinned.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  taken.memoryOperationType = pinned.memoryOperationType =
      CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  given.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  taken.memoryKind = given.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  pinned.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  taken.bytes = 64 << 20;
  given.bytes = 16 << 20;
  pinned.bytes = 1 << 20;
  taken.timestamp = 1'070'000;
  given.timestamp = 1'170'000;
  pinned.timestamp = 1'071'000;
  taken.deviceId = given.deviceId = pinned.deviceId = 3;
  ASSERT_TRUE(cupti_.Deliver({reinterpret_cast<const CUpti_Activity*>(&taken),
                              reinterpret_cast<const CUpti_Activity*>(&pinned),
                              reinterpret_cast<const CUpti_Activity*>(&given)}));
  ASSERT_TRUE(cupti_.Deliver({reinterpret_cast<const CUpti_Activity*>(&external),
                              reinterpret_cast<const CUpti_Activity*>(&sync),
                              reinterpret_cast<const CUpti_Activity*>(&step_start),
                              reinterpret_cast<const CUpti_Activity*>(&other_start),
                              reinterpret_cast<const CUpti_Activity*>(&other_end),
                              reinterpret_cast<const CUpti_Activity*>(&step_end)}));
  Close(source);
  EXPECT_TRUE(cupti_.enabled.empty()) << "no lingering overhead after the window";
  EXPECT_TRUE(cupti_.driver_calls.empty());
  EXPECT_FALSE(cupti_.subscribed);
  EXPECT_EQ(cupti_.flushes, 1);

  Harvest h = source.TakeHarvest();
  EXPECT_EQ(h.error, "");
  EXPECT_EQ(h.dropped, 0u);
  const common::WorkerTrace& t = h.trace;
  ASSERT_TRUE(t.Validate().ok()) << t.Validate();
  // Two kernels plus the synchronisation record.
  ASSERT_EQ(t.kernels.size(), 3u);
  EXPECT_EQ(t.strings.Get(t.kernels.name[0]), "myAdd(float*, float*, int)");
  EXPECT_EQ(t.kernels.start[0], 1'100'000);
  EXPECT_EQ(t.kernels.end[0], 1'110'000);
  EXPECT_EQ(t.kernels.device[0], 3);
  EXPECT_EQ(t.kernels.stream[0], 7);
  EXPECT_EQ(t.kernels.correlation[0], 41);
  EXPECT_EQ(t.kernels.grid_x[0], 128u);
  EXPECT_EQ(t.kernels.block_x[0], 256u);
  EXPECT_EQ(t.kernels.registers_per_thread[0], 32);
  EXPECT_EQ(t.kernels.shared_memory_bytes[0], 3072);
  EXPECT_EQ(t.kernels.kernel_class[0], common::KernelClass::kCompute);
  EXPECT_EQ(t.kernels.kernel_class[1], common::KernelClass::kCommunication);
  EXPECT_EQ(t.strings.Get(t.kernels.name[2]), "cudaStreamSynchronize");
  EXPECT_EQ(t.kernels.kernel_class[2], common::KernelClass::kSync);
  EXPECT_EQ(t.kernels.device[2], 3) << "from the context the kernels ran in";
  ASSERT_EQ(t.memcpys.size(), 2u);
  EXPECT_EQ(t.memcpys.kind[0], common::MemcpyKind::kHostToDevice);
  EXPECT_EQ(t.memcpys.bytes[0], 1 << 20);
  EXPECT_EQ(t.memcpys.start[0], 1'125'000);
  EXPECT_EQ(t.memcpys.kind[1], common::MemcpyKind::kMemset);
  ASSERT_EQ(t.runtime_calls.size(), 1u);
  EXPECT_EQ(t.strings.Get(t.runtime_calls.name[0]), "cudaLaunchKernel");
  EXPECT_EQ(t.runtime_calls.thread[0], 555);
  EXPECT_EQ(t.runtime_calls.start[0], 1'095'000);
  EXPECT_EQ(t.runtime_calls.external_id[0], 9001);
  // The NVTX ranges: both are host spans, the one matching the pattern is step 12.
  ASSERT_EQ(t.host_spans.size(), 2u);
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(t.steps.number[0], 12);
  EXPECT_EQ(t.steps.start[0], 1'045'000);
  EXPECT_EQ(t.steps.end[0], 1'900'000);
  EXPECT_EQ(t.steps.thread[0], 555);
  // Device memory on the host clock, allocations positive and releases negative, totals unknown.
  const common::MemoryEventTable& m = t.memory_events;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.time, (std::vector<TimeNs>{1'065'000, 1'165'000}));
  EXPECT_EQ(m.device, (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(m.bytes, (std::vector<int64_t>{64 << 20, -(16 << 20)}));
  EXPECT_EQ(m.total_allocated[0], common::kUnknownBytes);
}

// While the window runs, a take asks CUPTI for the buffers it has finished with (not forced:
// the training process's kernels go on being recorded), maps them with a fresh clock pair and
// hands them over once: the harvest after the window holds only the rest.
TEST_F(CuptiSourceTest, ATakeWhileTheWindowRunsHandsOverWhatCuptiFinishedOnce) {
  CuptiSource source(&cupti_, options_);
  EXPECT_EQ(source.TakeRecorded().trace.Counts().Total(), 0u) << "no window: nothing to take";
  EXPECT_EQ(cupti_.flushes, 0);
  Open(source);
  const CUpti_ActivityKernel10 k1 = Kernel(1'105'000, 1'115'000, "_Z5myAddPfS_i", 41);
  ASSERT_TRUE(cupti_.Deliver({reinterpret_cast<const CUpti_Activity*>(&k1)}));
  g_host = 1'500'000;
  cupti_.gpu_now = 1'505'000;
  Harvest first = source.TakeRecorded();
  ASSERT_EQ(cupti_.flush_flags.size(), 1u);
  EXPECT_EQ(cupti_.flush_flags[0], 0u) << "not forced";
  EXPECT_TRUE(cupti_.subscribed) << "still recording";
  ASSERT_EQ(first.trace.kernels.size(), 1u);
  EXPECT_EQ(first.trace.kernels.start[0], 1'100'000);
  EXPECT_EQ(first.trace.strings.Get(first.trace.kernels.name[0]), "myAdd(float*, float*, int)");
  EXPECT_EQ(clock_.pairs().size(), 2u);

  const CUpti_ActivityKernel10 k2 = Kernel(1'605'000, 1'615'000, "_Z5myAddPfS_i", 42);
  ASSERT_TRUE(cupti_.Deliver({reinterpret_cast<const CUpti_Activity*>(&k2)}));
  Close(source);
  Harvest rest = source.TakeHarvest();
  ASSERT_EQ(rest.trace.kernels.size(), 1u) << "what was taken is not handed over again";
  EXPECT_EQ(rest.trace.kernels.correlation[0], 42);
  EXPECT_EQ(rest.trace.kernels.start[0], 1'600'000);
  EXPECT_EQ(rest.trace.strings.Get(rest.trace.kernels.name[0]), "myAdd(float*, float*, int)");
  ASSERT_EQ(clock_.pairs().size(), 2u) << "the window's first pair and its last";
  EXPECT_EQ(clock_.pairs()[0].host_ns, 1'000'000);
  EXPECT_EQ(clock_.pairs()[1].host_ns, 2'000'000);
}

// What a real H200 handed over: kernels queued before CUPTI was enabled come with no real times
// (duration 0, a time ~1,960 s after the GPU clock's zero, long before the window), some records
// with 0. Only true times are kept: the rest is counted by reason, and every kept time lies in
// the window. A take in the middle checks against the window so far.
TEST_F(CuptiSourceTest, RecordsWithoutTrueTimesAreLeftOutAndCountedByReason) {
  CuptiSource source(&cupti_, options_);
  Open(source);  // host 1'000'000 = GPU 1'005'000
  const CUpti_ActivityKernel10 good = Kernel(1'105'000, 1'115'000, "_Z5myAddPfS_i", 41);
  const CUpti_ActivityKernel10 queued_a = Kernel(500'000, 500'000, "_Z4gemmPfS_i", 30);
  const CUpti_ActivityKernel10 queued_b = Kernel(500'100, 500'100, "_Z4geluPfS_i", 31);
  const CUpti_ActivityKernel10 zero = Kernel(0, 0, "_Z4gemmPfS_i", 32);
  CUpti_ActivityMemset4 backwards{};
  backwards.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  backwards.start = 1'200'000;
  backwards.end = 1'199'000;
  CUpti_ActivityAPI no_time{};
  no_time.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  no_time.cbid = 211;
  no_time.correlationId = 41;
  ASSERT_TRUE(cupti_.Deliver({reinterpret_cast<const CUpti_Activity*>(&queued_a),
                              reinterpret_cast<const CUpti_Activity*>(&queued_b),
                              reinterpret_cast<const CUpti_Activity*>(&good),
                              reinterpret_cast<const CUpti_Activity*>(&zero),
                              reinterpret_cast<const CUpti_Activity*>(&backwards),
                              reinterpret_cast<const CUpti_Activity*>(&no_time)}));
  // CUPTI can hand over a buffer between a take's clock pair and the take: a kernel that ended
  // after the pair is still the window's.
  const CUpti_ActivityKernel10 after_pair = Kernel(1'600'000, 1'610'000, "_Z5myAddPfS_i", 44);
  ASSERT_TRUE(cupti_.Deliver({reinterpret_cast<const CUpti_Activity*>(&after_pair)}));
  g_host = 1'500'000;
  cupti_.gpu_now = 1'505'000;
  Harvest first = source.TakeRecorded();
  ASSERT_EQ(first.trace.kernels.size(), 2u);
  EXPECT_EQ(first.trace.kernels.correlation[0], 41);
  EXPECT_EQ(first.trace.kernels.start[0], 1'100'000);
  EXPECT_EQ(first.trace.kernels.correlation[1], 44);
  EXPECT_EQ(first.trace.memcpys.size(), 0u);
  EXPECT_EQ(first.trace.runtime_calls.size(), 0u);
  const std::map<std::string, uint64_t> expected = {
      {"kernels: before the window", 2},
      {"kernels: no time", 1},
      {"copies and memsets: ends before it starts", 1},
      {"CUDA calls: no time", 1}};
  EXPECT_EQ(first.dropped_reasons, expected);
  EXPECT_EQ(first.dropped, 5u);

  // Before the close: inside. Past the close pair by more than the slack (100 us): not.
  const CUpti_ActivityKernel10 late = Kernel(1'900'000, 2'095'000, "_Z5myAddPfS_i", 42);
  const CUpti_ActivityKernel10 beyond = Kernel(2'100'000, 2'150'000, "_Z5myAddPfS_i", 43);
  ASSERT_TRUE(cupti_.Deliver({reinterpret_cast<const CUpti_Activity*>(&late),
                              reinterpret_cast<const CUpti_Activity*>(&beyond)}));
  Close(source);  // host 2'000'000 = GPU 2'005'000
  Harvest rest = source.TakeHarvest();
  ASSERT_EQ(rest.trace.kernels.size(), 1u);
  EXPECT_EQ(rest.trace.kernels.correlation[0], 42);
  EXPECT_EQ(rest.dropped_reasons,
            (std::map<std::string, uint64_t>{{"kernels: after the window", 1}}));
  EXPECT_EQ(rest.dropped, 1u);
  for (const common::WorkerTrace* t : {&first.trace, &rest.trace}) {
    for (size_t i = 0; i < t->kernels.size(); ++i) {
      EXPECT_GE(t->kernels.start[i], 1'000'000 - 100'000);
      EXPECT_LE(t->kernels.end[i], 2'000'000 + 100'000);
    }
  }
}

// The map keeps the window's first pair and the newest: two pairs read a millisecond apart
// would turn a microsecond of read error into milliseconds a second back.
TEST(GpuClockMapTest, ItMapsByTheLineFromTheWindowsFirstPairToTheNewest) {
  GpuClockMap clock;
  EXPECT_EQ(clock.ToHost(123), 123) << "no pair: the identity";
  clock.Add({.gpu_ns = 0, .host_ns = 10'000});
  EXPECT_EQ(clock.ToHost(500), 10'500) << "one pair: its offset";
  // The GPU runs 1 ppm slow; the last pair was read with 1 us of error.
  clock.Add({.gpu_ns = 4'000'000'000, .host_ns = 10'000 + 4'000'004'000});
  clock.Add({.gpu_ns = 4'001'000'000, .host_ns = 10'000 + 4'001'004'001 + 1'000});
  ASSERT_EQ(clock.pairs().size(), 2u);
  EXPECT_EQ(clock.pairs()[0].gpu_ns, 0u);
  EXPECT_NEAR(static_cast<double>(clock.ToHost(1'000'000'000) - 10'000 - 1'000'000'000), 1'000, 500)
      << "a second into the window: 1 us of drift, not the last read's error blown up";
  clock.Clear();
  EXPECT_EQ(clock.ToHost(7), 7);
}

TEST_F(CuptiSourceTest, AnEmptyPoolAndASpentBudgetDropAndCount) {
  CuptiSource source(&cupti_, options_);
  Open(source, /*max_events=*/2);
  // CUPTI holds both buffers of the pool; a third request is refused.
  uint8_t* held1 = cupti_.Hold();
  uint8_t* held2 = cupti_.Hold();
  ASSERT_NE(held1, nullptr);
  ASSERT_NE(held2, nullptr);
  EXPECT_EQ(source.buffers_out(), 2u);
  EXPECT_FALSE(cupti_.Deliver({}));
  EXPECT_EQ(source.buffers_refused(), 1u);
  // CUPTI hands one back with three kernels, having dropped 5 records for want of a buffer.
  const CUpti_ActivityKernel10 k[3] = {Kernel(1'100'000, 1'101'000, "a", 1),
                                       Kernel(1'102'000, 1'103'000, "b", 2),
                                       Kernel(1'104'000, 1'105'000, "c", 3)};
  cupti_.filled[held1] = {reinterpret_cast<const CUpti_Activity*>(&k[0]),
                          reinterpret_cast<const CUpti_Activity*>(&k[1]),
                          reinterpret_cast<const CUpti_Activity*>(&k[2])};
  cupti_.next_dropped = 5;
  cupti_.completed(nullptr, 0, held1, 4096, 4096);
  cupti_.completed(nullptr, 0, held2, 4096, 0);
  EXPECT_EQ(source.buffers_out(), 0u);
  Close(source);
  Harvest h = source.TakeHarvest();
  EXPECT_EQ(h.trace.kernels.size(), 2u) << "the window's budget";
  EXPECT_EQ(budget_.dropped(), 1u);
  EXPECT_EQ(h.dropped, 5u) << "CUPTI's own count";
  // The pool is whole again: the next window gets buffers.
  Open(source);
  EXPECT_TRUE(cupti_.Deliver({}));
  Close(source);
}

TEST_F(CuptiSourceTest, AnotherSubscriberIsAClearWindowErrorNotACrash) {
  CuptiSource source(&cupti_, options_);
  cupti_.subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  Open(source);
  EXPECT_TRUE(cupti_.enabled.empty());
  Close(source);
  Harvest h = source.TakeHarvest();
  EXPECT_NE(h.error.find("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"), std::string::npos)
      << h.error;
  EXPECT_NE(h.error.find("another profiler holds CUPTI"), std::string::npos) << h.error;
  EXPECT_EQ(h.trace.Counts().Total(), 0u);
}

TEST_F(CuptiSourceTest, InsufficientPrivilegesIsNamedWithTheFix) {
  CuptiSource source(&cupti_, options_);
  cupti_.failing_kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  cupti_.enable_result = CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
  Open(source);
  Close(source);
  EXPECT_TRUE(cupti_.enabled.empty());
  Harvest h = source.TakeHarvest();
  EXPECT_NE(
      h.error.find("cuptiActivityEnable(CONCURRENT_KERNEL): CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"),
      std::string::npos)
      << h.error;
  EXPECT_NE(h.error.find("NVreg_RestrictProfilingToAdminUsers"), std::string::npos);
}

TEST_F(CuptiSourceTest, OnlyOneSourcePerProcess) {
  CuptiSource first(&cupti_, options_);
  FakeCupti other;
  CuptiSource second(&other, options_);
  Open(second);
  Close(second);
  EXPECT_NE(second.TakeHarvest().error.find("another CUPTI source"), std::string::npos);
}

}  // namespace
}  // namespace podscope::agent::probe
