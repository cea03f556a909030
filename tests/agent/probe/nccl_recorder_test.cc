// The NCCL profiler plugin driven through the same v6 / v5 / v4 tables NCCL reads.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "agent/probe/collective_links.h"
#include "agent/probe/nccl_plugin.h"

namespace podscope::agent::probe {
namespace {

using namespace nccl_abi;

TimeNs g_now = 0;
TimeNs FakeNow() { return g_now; }

NcclRecorder* g_recorder = nullptr;
NcclRecorder* TestRecorder() { return g_recorder; }

class NcclPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_now = 1'000'000;
    g_recorder = &recorder_;
    SetNcclRecorderProvider(&TestRecorder);
  }
  void TearDown() override { SetNcclRecorderProvider(nullptr); }

  // An AllReduce of 1024 floats on `context`; its kernel ran on two channels.
  void* AllReduce(void* context, uint64_t seq, uint64_t ch0_start, uint64_t ch1_start,
                  uint64_t end) {
    EventDescrV5 coll{};
    coll.type = kProfileColl;
    coll.rank = 1;
    coll.coll.seqNumber = seq;
    coll.coll.func = "AllReduce";
    coll.coll.count = 1024;
    coll.coll.datatype = "ncclFloat32";
    coll.coll.nChannels = 2;
    coll.coll.algo = "RING";
    coll.coll.proto = "LL128";
    void* handle = nullptr;
    EXPECT_EQ(kNcclProfilerV5.startEvent(context, &handle, &coll), kNcclSuccess);
    if (handle == nullptr) return nullptr;
    for (uint64_t start : {ch0_start, ch1_start}) {
      EventDescrV5 ch{};
      ch.type = kProfileKernelCh;
      ch.parentObj = handle;
      ch.kernelCh.pTimer = start;
      void* ch_handle = nullptr;
      kNcclProfilerV5.startEvent(context, &ch_handle, &ch);
      EXPECT_NE(ch_handle, nullptr);
      EventStateArgs args{};
      args.kernelCh.pTimer = start == ch0_start ? end - 10 : end;
      kNcclProfilerV5.recordEventState(ch_handle, kKernelChStop, &args);
      kNcclProfilerV5.stopEvent(ch_handle);
    }
    kNcclProfilerV5.stopEvent(handle);
    return handle;
  }

  // A collective that starts and is left running (its kernel channels are the test's to drive).
  void* StartCollective(void* context, uint64_t seq, const char* func, uint64_t count,
                        const char* datatype) {
    EventDescrV5 coll{};
    coll.type = kProfileColl;
    coll.coll.seqNumber = seq;
    coll.coll.func = func;
    coll.coll.count = count;
    coll.coll.datatype = datatype;
    coll.coll.nChannels = 1;
    void* handle = nullptr;
    kNcclProfilerV5.startEvent(context, &handle, &coll);
    return handle;
  }
  void* StartChannel(void* context, void* parent, uint64_t gpu_start) {
    EventDescrV5 ch{};
    ch.type = kProfileKernelCh;
    ch.parentObj = parent;
    ch.kernelCh.pTimer = gpu_start;
    void* handle = reinterpret_cast<void*>(1);
    kNcclProfilerV5.startEvent(context, &handle, &ch);
    return handle;
  }

  NcclRecorder recorder_{&FakeNow};
  EventBudget budget_;
  GpuClockMap gpu_clock_;
};

TEST_F(NcclPluginTest, RecordsCollectivesOnlyInsideAWindowWithKernelTimesOnTheHostClock) {
  int mask = -1;
  void* context = nullptr;
  ASSERT_EQ(kNcclProfilerV5.init(&context, 0xabcdef, &mask, "dp", 2, 8, 1, nullptr), kNcclSuccess);
  EXPECT_EQ(mask, 0) << "nothing is asked of NCCL outside a window";
  EXPECT_EQ(AllReduce(context, 1, 100, 200, 900), nullptr);

  // GPU clock 5 us ahead of the host's.
  gpu_clock_.Add({1'005'000, 1'000'000});
  budget_.Reset(100);
  recorder_.OpenWindow(g_now, &budget_, &gpu_clock_);
  EXPECT_EQ(mask, NcclRecorder::kWindowMask);
  g_now = 1'200'000;
  ASSERT_NE(AllReduce(context, 7, 1'210'000, 1'209'000, 1'300'000), nullptr);
  recorder_.CloseWindow(g_now);
  EXPECT_EQ(mask, 0);

  Harvest h = recorder_.TakeHarvest();
  EXPECT_EQ(h.dropped, 0u);
  const common::CollectiveTable& c = h.trace.collectives;
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(h.trace.strings.Get(c.communicator[0]), "nccl:0000000000abcdef");
  EXPECT_EQ(c.rank[0], 1);
  EXPECT_EQ(c.nranks[0], 8);
  EXPECT_EQ(c.op[0], common::CollectiveOp::kAllReduce);
  EXPECT_EQ(c.sequence[0], 7);
  EXPECT_EQ(c.count[0], 1024);
  EXPECT_EQ(c.bytes[0], 4096);
  EXPECT_EQ(h.trace.strings.Get(c.dtype[0]), "ncclFloat32");
  EXPECT_EQ(h.trace.strings.Get(c.algorithm[0]), "RING");
  EXPECT_EQ(h.trace.strings.Get(c.protocol[0]), "LL128");
  EXPECT_EQ(c.channels[0], 2);
  EXPECT_EQ(c.enqueue[0], 1'200'000);
  // Earliest channel start and latest channel stop, 5 us earlier on the host clock.
  EXPECT_EQ(c.kernel_start[0], 1'204'000);
  EXPECT_EQ(c.kernel_end[0], 1'295'000);
  EXPECT_TRUE(h.trace.Validate().ok());
  EXPECT_EQ(kNcclProfilerV5.finalize(context), kNcclSuccess);
}

// Version 6 (NCCL 2.29): the same collectives and kernel channels as v5, through the larger
// descriptor; copy-engine collectives are not asked for, and sent anyway (with their syncs and
// batches) they get no handle and no row.
TEST_F(NcclPluginTest, VersionSixRecordsKernelCollectivesAndCountsCopyEngineOnes) {
  int mask = -1;
  void* context = nullptr;
  ASSERT_EQ(kNcclProfilerV6.init(&context, 0x66, &mask, "dp", 1, 4, 2, nullptr), kNcclSuccess);
  EXPECT_EQ(mask, 0);
  gpu_clock_.Add({1'000'000, 1'000'000});
  budget_.Reset(100);
  recorder_.OpenWindow(g_now, &budget_, &gpu_clock_);
  EXPECT_EQ(mask, NcclRecorder::kWindowMask);  // copy-engine events are not asked for
  g_now = 1'100'000;
  EventDescrV6 coll{};
  coll.type = kProfileColl;
  coll.coll.seqNumber = 3;
  coll.coll.func = "ReduceScatter";
  coll.coll.count = 256;
  coll.coll.datatype = "ncclBfloat16";
  coll.coll.nChannels = 1;
  coll.coll.algo = "RING";
  coll.coll.proto = "SIMPLE";
  void* handle = nullptr;
  ASSERT_EQ(kNcclProfilerV6.startEvent(context, &handle, &coll), kNcclSuccess);
  ASSERT_NE(handle, nullptr);
  EventDescrV6 ch{};
  ch.type = kProfileKernelCh;
  ch.parentObj = handle;
  ch.kernelCh.pTimer = 1'110'000;
  void* ch_handle = nullptr;
  kNcclProfilerV6.startEvent(context, &ch_handle, &ch);
  ASSERT_NE(ch_handle, nullptr);
  g_now = 1'200'000;
  EventStateArgs args{};
  args.kernelCh.pTimer = 1'190'000;
  EXPECT_EQ(kNcclProfilerV6.recordEventState(ch_handle, kKernelChStop, &args), kNcclSuccess);
  kNcclProfilerV6.stopEvent(ch_handle);
  kNcclProfilerV6.stopEvent(handle);

  // A copy-engine AllGather with its sync and batch, as NCCL 2.29 reports one.
  EventDescrV6 ce{};
  ce.type = kProfileCeColl;
  ce.ceColl.seqNumber = 1;
  ce.ceColl.func = "AllGather";
  ce.ceColl.count = 4096;
  ce.ceColl.datatype = "ncclBfloat16";
  ce.ceColl.syncStrategy = "MC";
  void* ce_handle = reinterpret_cast<void*>(1);
  EXPECT_EQ(kNcclProfilerV6.startEvent(context, &ce_handle, &ce), kNcclSuccess);
  EXPECT_EQ(ce_handle, nullptr);
  for (uint64_t type : {kProfileCeSync, kProfileCeBatch}) {
    EventDescrV6 part{};
    part.type = type;
    part.parentObj = ce_handle;
    void* part_handle = reinterpret_cast<void*>(1);
    EXPECT_EQ(kNcclProfilerV6.startEvent(context, &part_handle, &part), kNcclSuccess);
    EXPECT_EQ(part_handle, nullptr);
    EXPECT_EQ(kNcclProfilerV6.stopEvent(part_handle), kNcclSuccess);
  }
  EXPECT_EQ(kNcclProfilerV6.stopEvent(ce_handle), kNcclSuccess);
  recorder_.CloseWindow(g_now);

  Harvest h = recorder_.TakeHarvest();
  EXPECT_EQ(h.dropped, 0u);
  const common::CollectiveTable& c = h.trace.collectives;
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c.op[0], common::CollectiveOp::kReduceScatter);
  EXPECT_EQ(c.sequence[0], 3);
  EXPECT_EQ(c.bytes[0], 512);
  EXPECT_EQ(c.rank[0], 2);
  EXPECT_EQ(c.enqueue[0], 1'100'000);
  EXPECT_EQ(c.kernel_start[0], 1'110'000);
  EXPECT_EQ(c.kernel_end[0], 1'190'000);
  EXPECT_EQ(kNcclProfilerV6.finalize(context), kNcclSuccess);
}

// NCCL before 2.30 can give a kernel channel another task's timer: a start seconds away from its
// collective, or a stop before the collective began. Those are dropped and counted; the
// collective keeps the times of its other channels.
TEST_F(NcclPluginTest, KernelChannelTimesThatCannotBeTrueAreDroppedAndCounted) {
  int mask = 0;
  void* context = nullptr;
  ASSERT_EQ(kNcclProfilerV6.init(&context, 0x77, &mask, "dp", 1, 2, 0, nullptr), kNcclSuccess);
  budget_.Reset(100);
  recorder_.OpenWindow(g_now, &budget_, &gpu_clock_);
  // Before the window's first clock pair nothing can be held against the host's clock: a time
  // seconds away is kept.
  g_now = 2'000'000;
  void* unchecked = StartCollective(context, 1, "AllReduce", 16, "ncclFloat32");
  ASSERT_NE(unchecked, nullptr);
  StartChannel(context, unchecked, 7'000'000'000);
  EXPECT_EQ(recorder_.bad_channel_times(), 0u);

  gpu_clock_.Add({1'000'000, 1'000'000});
  g_now = 5'000'000'000;
  void* coll = StartCollective(context, 2, "AllReduce", 16, "ncclFloat32");
  ASSERT_NE(coll, nullptr);
  g_now = 5'001'000'000;  // NCCL's proxy reports the channels a millisecond later
  void* good = StartChannel(context, coll, 5'000'010'000);
  void* early = StartChannel(context, coll, 1'000'000'000);  // four seconds before the enqueue
  void* late = StartChannel(context, coll, 9'000'000'000);   // four seconds after it was reported
  void* backwards = StartChannel(context, coll, 5'000'020'000);
  for (auto [ch, stop] :
       {std::pair{good, uint64_t{5'000'500'000}}, std::pair{early, uint64_t{5'000'600'000}},
        std::pair{late, uint64_t{5'000'700'000}}, std::pair{backwards, uint64_t{5'000'005'000}}}) {
    ASSERT_NE(ch, nullptr);
    EventStateArgs args{};
    args.kernelCh.pTimer = stop;
    kNcclProfilerV6.recordEventState(ch, kKernelChStop, &args);
  }
  recorder_.CloseWindow(g_now);
  EXPECT_EQ(recorder_.bad_channel_times(), 3u);  // two starts, and a stop before the first start
  Harvest h = recorder_.TakeHarvest();
  EXPECT_EQ(h.dropped, 3u + 1u);  // and the unchecked collective, whose channel never stopped
  ASSERT_EQ(h.trace.collectives.size(), 1u);
  EXPECT_EQ(h.trace.collectives.sequence[0], 2);
  EXPECT_EQ(h.trace.collectives.kernel_start[0], 5'000'010'000);
  EXPECT_EQ(h.trace.collectives.kernel_end[0], 5'000'700'000);
  EXPECT_EQ(kNcclProfilerV6.finalize(context), kNcclSuccess);
}

TEST_F(NcclPluginTest, BudgetExhaustionDropsAndCountsAndUnfinishedKernelsAreNotInvented) {
  int mask = 0;
  void* context = nullptr;
  ASSERT_EQ(kNcclProfilerV5.init(&context, 1, &mask, "", 1, 2, 0, nullptr), kNcclSuccess);
  budget_.Reset(2);
  recorder_.OpenWindow(g_now, &budget_, nullptr);
  EXPECT_NE(AllReduce(context, 1, 10, 11, 20), nullptr);
  // Started, but its kernel never reports.
  EventDescrV5 coll{};
  coll.type = kProfileColl;
  coll.coll.func = "AllGather";
  coll.coll.datatype = "ncclBfloat16";
  void* pending = nullptr;
  kNcclProfilerV5.startEvent(context, &pending, &coll);
  EXPECT_NE(pending, nullptr);
  // Over the budget of 2.
  EXPECT_EQ(AllReduce(context, 3, 30, 31, 40), nullptr);
  EXPECT_EQ(budget_.dropped(), 1u);
  recorder_.CloseWindow(g_now);
  Harvest h = recorder_.TakeHarvest();
  EXPECT_EQ(h.trace.collectives.size(), 1u);
  EXPECT_EQ(h.dropped, 1u) << "the AllGather without kernel times";
  EXPECT_EQ(h.dropped_reasons,
            (std::map<std::string, uint64_t>{{"collectives: no device time", 1}}));

  // A kernel channel reporting after the harvest finds a stale handle and is ignored.
  EventDescrV5 late{};
  late.type = kProfileKernelCh;
  late.parentObj = pending;
  void* late_handle = reinterpret_cast<void*>(1);
  kNcclProfilerV5.startEvent(context, &late_handle, &late);
  EXPECT_EQ(late_handle, nullptr);
  kNcclProfilerV5.finalize(context);
}

// The window's end holds collectives as it holds CUPTI's kernels: one whose kernel was still
// running when the window's last clock pair was read (plus 100 us) is left out and counted.
TEST_F(NcclPluginTest, ACollectiveStillRunningWhenTheWindowClosedIsNotTheWindows) {
  int mask = 0;
  void* context = nullptr;
  ASSERT_EQ(kNcclProfilerV5.init(&context, 2, &mask, "", 1, 2, 0, nullptr), kNcclSuccess);
  gpu_clock_.Add({1'005'000, 1'000'000});
  budget_.Reset(10);
  recorder_.OpenWindow(g_now, &budget_, &gpu_clock_);
  g_now = 1'100'000;
  ASSERT_NE(AllReduce(context, 1, 1'110'000, 1'111'000, 1'200'000), nullptr);  // inside
  ASSERT_NE(AllReduce(context, 2, 1'390'000, 1'391'000, 1'495'000), nullptr);  // within 100 us
  ASSERT_NE(AllReduce(context, 3, 1'395'000, 1'396'000, 1'600'000), nullptr);  // past it
  recorder_.CloseWindow(g_now);
  gpu_clock_.Add({1'405'000, 1'400'000});  // the close pair
  Harvest h = recorder_.TakeHarvest();
  ASSERT_EQ(h.trace.collectives.size(), 2u);
  EXPECT_EQ(h.trace.collectives.sequence[0], 1);
  EXPECT_EQ(h.trace.collectives.sequence[1], 2);
  EXPECT_EQ(h.dropped, 1u);
  EXPECT_EQ(h.dropped_reasons,
            (std::map<std::string, uint64_t>{{"collectives: after the window", 1}}));
  kNcclProfilerV5.finalize(context);
}

TEST_F(NcclPluginTest, VersionFourAndPointToPoint) {
  int mask = 0;
  void* context = nullptr;
  ASSERT_EQ(kNcclProfilerV4.init(&context, &mask, "pp", 0x42, 1, 2, 1, nullptr), kNcclSuccess);
  budget_.Reset(10);
  recorder_.OpenWindow(g_now, &budget_, nullptr);
  EXPECT_EQ(mask, NcclRecorder::kWindowMask);
  EventDescrV4 send{};
  send.type = static_cast<uint8_t>(kProfileP2p);
  send.p2p.func = "Send";
  send.p2p.datatype = "ncclInt64";
  send.p2p.count = 10;
  send.p2p.peer = 0;
  send.p2p.nChannels = 1;
  void* handle = nullptr;
  kNcclProfilerV4.startEvent(context, &handle, &send);
  ASSERT_NE(handle, nullptr);
  EventDescrV4 ch{};
  ch.type = static_cast<uint8_t>(kProfileKernelCh);
  ch.parentObj = handle;
  ch.kernelCh.pTimer = 5'000;
  void* ch_handle = nullptr;
  kNcclProfilerV4.startEvent(context, &ch_handle, &ch);
  EventStateArgs args{};
  args.kernelCh.pTimer = 7'000;
  kNcclProfilerV4.recordEventState(ch_handle, kKernelChStop, &args);
  // Events the probe does not ask for get no handle.
  EventDescrV4 proxy{};
  proxy.type = static_cast<uint8_t>(kProfileProxyOp);
  void* proxy_handle = reinterpret_cast<void*>(1);
  kNcclProfilerV4.startEvent(context, &proxy_handle, &proxy);
  EXPECT_EQ(proxy_handle, nullptr);
  recorder_.CloseWindow(g_now);
  Harvest h = recorder_.TakeHarvest();
  ASSERT_EQ(h.trace.collectives.size(), 1u);
  EXPECT_EQ(h.trace.collectives.op[0], common::CollectiveOp::kSend);
  EXPECT_EQ(h.trace.collectives.sequence[0], common::kUnknownSequence);
  EXPECT_EQ(h.trace.collectives.bytes[0], 80);
  EXPECT_EQ(h.trace.strings.Get(h.trace.collectives.communicator[0]), "nccl:0000000000000042");
  EXPECT_EQ(h.trace.collectives.kernel_start[0], 5'000)
      << "no clock pairs: the GPU clock is taken as the host's";
  EXPECT_EQ(h.trace.collectives.kernel_end[0], 7'000);
  kNcclProfilerV4.finalize(context);
}

TEST_F(NcclPluginTest, InitFailsWithoutARecorderSoNcclDisablesThePlugin) {
  SetNcclRecorderProvider(nullptr);
  int mask = 0;
  void* context = reinterpret_cast<void*>(1);
  EXPECT_NE(kNcclProfilerV5.init(&context, 1, &mask, "", 1, 1, 0, nullptr), kNcclSuccess);
  EXPECT_EQ(context, nullptr);
}

TEST_F(NcclPluginTest, ACommunicatorMadeDuringAWindowRecordsAtOnce) {
  budget_.Reset(10);
  recorder_.OpenWindow(g_now, &budget_, nullptr);
  int mask = 0;
  void* context = nullptr;
  ASSERT_EQ(kNcclProfilerV5.init(&context, 9, &mask, "late", 1, 1, 0, nullptr), kNcclSuccess);
  EXPECT_EQ(mask, NcclRecorder::kWindowMask);
  EXPECT_EQ(recorder_.communicators(), 1u);
  kNcclProfilerV5.finalize(context);
  EXPECT_EQ(recorder_.communicators(), 0u);
  recorder_.CloseWindow(g_now);
}

// Watch mode: between windows NCCL is asked only for collectives and their kernel
// channels, and every finished collective is kept for the next flush.
TEST_F(NcclPluginTest, WatchModeAsksForLessBetweenWindowsAndKeepsEveryFinishedCollective) {
  int mask = -1;
  void* context = nullptr;
  ASSERT_EQ(kNcclProfilerV5.init(&context, 0xabcdef, &mask, "dp", 2, 8, 1, nullptr), kNcclSuccess);
  EXPECT_EQ(mask, 0);
  recorder_.SetWatching(true);
  EXPECT_EQ(mask, NcclRecorder::kWatchMask);
  EXPECT_EQ(NcclRecorder::kWatchMask & (1 << 2), 0) << "no point-to-point events between windows";

  // Between windows: a handle, and the collective is kept.
  g_now = 2'000'000;
  ASSERT_NE(AllReduce(context, 3, 2'100'000, 2'050'000, 2'400'000), nullptr);
  // Inside a window: the window's row and the watch's both.
  budget_.Reset(100);
  recorder_.OpenWindow(g_now, &budget_, &gpu_clock_);
  EXPECT_EQ(mask, NcclRecorder::kWindowMask);
  g_now = 3'000'000;
  ASSERT_NE(AllReduce(context, 4, 3'100'000, 3'100'000, 3'500'000), nullptr);
  recorder_.CloseWindow(g_now);
  EXPECT_EQ(mask, NcclRecorder::kWatchMask) << "back to watching after the window";
  EXPECT_EQ(recorder_.TakeHarvest().trace.collectives.size(), 1u);

  GpuClockMap identity;
  WatchHarvest h;
  recorder_.TakeWatch(g_now, identity, &h);
  ASSERT_EQ(h.collectives.size(), 2u);
  const common::CollectiveArrival& a = h.collectives[0];
  EXPECT_EQ(a.communicator, 0xabcdefu);
  EXPECT_EQ(a.sequence, 3);
  EXPECT_EQ(a.op, common::CollectiveOp::kAllReduce);
  EXPECT_EQ(a.nranks, 8);
  EXPECT_EQ(a.bytes, 4096);
  EXPECT_EQ(a.enqueue_ns, 2'000'000);
  EXPECT_EQ(a.start_ns, 2'050'000);  // the earliest channel
  EXPECT_EQ(a.end_ns, 2'400'000);    // the latest
  EXPECT_EQ(h.collectives[1].sequence, 4);
  EXPECT_EQ(h.collectives[1].enqueue_ns, 3'000'000);
  EXPECT_EQ(h.dropped, 0u);
  EXPECT_TRUE(h.progress.empty()) << "the communicator was busy a moment ago";

  // Taken once only.
  WatchHarvest again;
  recorder_.TakeWatch(g_now, identity, &again);
  EXPECT_TRUE(again.collectives.empty());

  recorder_.SetWatching(false);
  EXPECT_EQ(mask, 0) << "watch off: nothing between windows";
  EXPECT_EQ(AllReduce(context, 5, 1, 1, 2), nullptr);
  EXPECT_EQ(kNcclProfilerV5.finalize(context), kNcclSuccess);
}

TEST_F(NcclPluginTest, AQuietCommunicatorReportsWhereTheRankStandsAndAnUnfinishedCollectiveWaits) {
  int mask = -1;
  void* context = nullptr;
  recorder_.SetWatching(true);
  ASSERT_EQ(kNcclProfilerV5.init(&context, 0x77, &mask, "dp", 1, 4, 2, nullptr), kNcclSuccess);
  EXPECT_EQ(mask, NcclRecorder::kWatchMask) << "a communicator made while watching watches at once";
  g_now = 10'000'000;
  ASSERT_NE(AllReduce(context, 41, 10'100'000, 10'100'000, 10'300'000), nullptr);
  // Sequence 42 enters and its kernel starts, but never ends (a peer never came).
  g_now = 20'000'000;
  void* handle = StartCollective(context, 42, "AllGather", 256, "ncclBfloat16");
  ASSERT_NE(handle, nullptr);
  void* ch_handle = StartChannel(context, handle, 20'100'000);

  GpuClockMap identity;
  WatchHarvest early;
  recorder_.TakeWatch(g_now + 1'000, identity, &early);
  ASSERT_EQ(early.collectives.size(), 1u);
  EXPECT_EQ(early.collectives[0].sequence, 41);
  EXPECT_TRUE(early.progress.empty());

  // A second later nothing has moved: the progress says 42 entered, 41 completed.
  const TimeNs later = g_now + NcclRecorder::kQuietNs;
  WatchHarvest h;
  recorder_.TakeWatch(later, identity, &h);
  EXPECT_TRUE(h.collectives.empty()) << "an unfinished collective is not sent";
  ASSERT_EQ(h.progress.size(), 1u);
  const common::RankProgress& p = h.progress[0];
  EXPECT_EQ(p.communicator, 0x77u);
  EXPECT_EQ(p.nranks, 4);
  EXPECT_EQ(p.entered_sequence, 42);
  EXPECT_EQ(p.entered_ns, 20'000'000);
  EXPECT_EQ(p.entered_op, common::CollectiveOp::kAllGather);
  EXPECT_EQ(p.entered_bytes, 512);
  EXPECT_EQ(p.completed_sequence, 41);
  EXPECT_EQ(p.completed_ns, 10'000'000) << "when the probe saw the last channel stop";

  // It finishes after all: sent with the next flush.
  EventStateArgs args{};
  args.kernelCh.pTimer = 30'000'000;
  kNcclProfilerV5.recordEventState(ch_handle, kKernelChStop, &args);
  WatchHarvest last;
  recorder_.TakeWatch(later + 1, identity, &last);
  ASSERT_EQ(last.collectives.size(), 1u);
  EXPECT_EQ(last.collectives[0].sequence, 42);
  EXPECT_EQ(last.collectives[0].end_ns, 30'000'000);
  EXPECT_EQ(kNcclProfilerV5.finalize(context), kNcclSuccess);
}

TEST_F(NcclPluginTest, AWatchRingThatOverrunsDropsTheOldestAndCountsAndTheirHandlesGoStale) {
  int mask = -1;
  void* context = nullptr;
  ASSERT_EQ(kNcclProfilerV5.init(&context, 0x1, &mask, "dp", 1, 2, 0, nullptr), kNcclSuccess);
  recorder_.SetWatching(true);
  // The first collective's kernel is still running when the ring comes round to its slot.
  void* first = StartCollective(context, 0, "AllReduce", 1, "ncclFloat32");
  ASSERT_NE(first, nullptr);
  for (uint64_t seq = 1; seq < NcclRecorder::kWatchRingSlots + 10; ++seq) {
    ASSERT_NE(AllReduce(context, seq, 5, 5, 6), nullptr);
  }
  // The first one's channel: its slot belongs to another collective now.
  EXPECT_EQ(StartChannel(context, first, 0), nullptr) << "a stale watch handle is ignored";

  GpuClockMap identity;
  WatchHarvest h;
  recorder_.TakeWatch(g_now, identity, &h);
  EXPECT_EQ(h.dropped, 10u);
  EXPECT_EQ(h.collectives.size(), NcclRecorder::kWatchRingSlots);
  EXPECT_EQ(h.collectives.front().sequence, 10);
  EXPECT_EQ(h.collectives.back().sequence, static_cast<int64_t>(NcclRecorder::kWatchRingSlots + 9));
  EXPECT_EQ(kNcclProfilerV5.finalize(context), kNcclSuccess);
}

TEST(GpuClockMapTest, MapsThroughTheLineOfTheWindowsPairs) {
  GpuClockMap map;
  EXPECT_EQ(map.ToHost(123), 123);
  map.Add({1'000'000, 500});
  EXPECT_EQ(map.ToHost(1'000'100), 600);
  // The GPU clock ran 1000 ppm fast over the window: 1'001'000 GPU ns for 1'000'000 host ns.
  map.Add({2'001'000, 1'000'500});
  EXPECT_EQ(map.ToHost(1'000'000), 500);
  EXPECT_EQ(map.ToHost(2'001'000), 1'000'500);
  EXPECT_EQ(map.ToHost(1'500'500), 500'500);
}

}  // namespace
}  // namespace podscope::agent::probe

namespace podscope::agent::probe {
namespace {

void AddKernel(common::WorkerTrace& t, TimeNs start, common::KernelClass cls, int64_t correlation) {
  common::KernelTable& k = t.kernels;
  k.start.push_back(start);
  k.end.push_back(start + 1000);
  k.device.push_back(0);
  k.stream.push_back(1);
  k.name.push_back(t.strings.Intern(
      cls == common::KernelClass::kCommunication ? "ncclDevKernel_AllReduce" : "gemm"));
  k.correlation.push_back(correlation);
  for (auto* col : {&k.grid_x, &k.grid_y, &k.grid_z, &k.block_x, &k.block_y, &k.block_z})
    col->push_back(1);
  k.registers_per_thread.push_back(0);
  k.shared_memory_bytes.push_back(0);
  k.kernel_class.push_back(cls);
}

TEST(CollectiveLinksTest, EachCollectiveTakesTheNearestUnclaimedCommunicationKernel) {
  common::WorkerTrace cupti;
  AddKernel(cupti, 10'000, common::KernelClass::kCompute, 1);
  AddKernel(cupti, 10'003, common::KernelClass::kCommunication, 2);
  AddKernel(cupti, 20'000, common::KernelClass::kCommunication, 3);
  AddKernel(cupti, 500'000, common::KernelClass::kCommunication, 4);
  common::WorkerTrace nccl;
  for (TimeNs start : {10'000, 10'100, 400'000}) {
    common::CollectiveTable& c = nccl.collectives;
    c.enqueue.push_back(start - 500);
    c.kernel_start.push_back(start);
    c.correlation.push_back(-1);
  }
  EXPECT_EQ(LinkCollectivesToKernels(cupti, &nccl, /*tolerance_ns=*/50'000), 2u);
  EXPECT_EQ(nccl.collectives.correlation[0], 2)
      << "the compute kernel at the same instant is not it";
  EXPECT_EQ(nccl.collectives.correlation[1], 3) << "kernel 2 is taken";
  EXPECT_EQ(nccl.collectives.correlation[2], -1) << "nothing within 50 us";
}

}  // namespace
}  // namespace podscope::agent::probe
