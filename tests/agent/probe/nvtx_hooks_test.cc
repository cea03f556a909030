// The probe's NVTX hooks through an export table laid out as NVTX's loader hands it to an
// injection library (nvtxDetail/nvtxInitDefs.h): the core module's slots, holding NVTX's
// initialisation stubs (which call the slot again: never to be called on) until another tool,
// as CUPTI does when it initialises first, writes its own handlers into some of them.
#include "agent/probe/nvtx_hooks.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace podscope::agent::probe {
namespace {

NvtxFunctionPointer g_slots[NVTX_CBID_CORE_SIZE];
NvtxFunctionPointer* g_table[NVTX_CBID_CORE_SIZE];
std::vector<std::string> g_previous;  // what the other tool's handlers saw

int NVTX_API GetTable(NvtxCallbackModule module, NvtxFunctionTable* out, unsigned* size) {
  if (module != NVTX_CB_MODULE_CORE) return 0;
  *out = g_table;
  *size = NVTX_CBID_CORE_SIZE;
  return 1;
}
const NvtxExportTableCallbacks g_callbacks{sizeof(NvtxExportTableCallbacks), &GetTable};
uint32_t g_version = 0;
void NVTX_API SetVersion(uint32_t version) { g_version = version; }
const NvtxExportTableVersionInfo g_version_info{sizeof(NvtxExportTableVersionInfo), 3, 0,
                                                &SetVersion};
const void* NVTX_API Get(uint32_t id) {
  if (id == NVTX_ETID_CALLBACKS) return &g_callbacks;
  if (id == NVTX_ETID_VERSIONINFO) return &g_version_info;
  return nullptr;
}

int NVTX_API OtherPushA(const char* m) {
  g_previous.push_back(std::string("push ") + m);
  return 41;
}
int NVTX_API OtherPop() {
  g_previous.push_back("pop");
  return 40;
}
nvtxRangeId_t NVTX_API OtherStartA(const char* m) {
  g_previous.push_back(std::string("start ") + m);
  return 1000;
}
void NVTX_API OtherEnd(nvtxRangeId_t id) { g_previous.push_back("end " + std::to_string(id)); }

int g_stub_calls = 0;
int NVTX_API StubPushA(const char*) { return ++g_stub_calls; }
int NVTX_API StubPushEx(const nvtxEventAttributes_t*) { return ++g_stub_calls; }
int NVTX_API StubPop() { return ++g_stub_calls; }

template <typename Fn>
Fn Slot(NvtxCallbackIdCore id) {
  return reinterpret_cast<Fn>(g_slots[id]);
}

TEST(NvtxHooksTest, StepRangesBecomeMarksAndEveryRangeStillReachesTheToolBefore) {
  for (int i = 0; i < NVTX_CBID_CORE_SIZE; ++i) g_table[i] = &g_slots[i];
  g_slots[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&StubPushA);
  g_slots[NVTX_CBID_CORE_RangePushEx] = reinterpret_cast<NvtxFunctionPointer>(&StubPushEx);
  g_slots[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&StubPop);
  // The other tool initialises first and takes four of the slots; PushEx keeps NVTX's stub.
  auto other_tool = [] {
    g_slots[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&OtherPushA);
    g_slots[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&OtherPop);
    g_slots[NVTX_CBID_CORE_RangeStartA] = reinterpret_cast<NvtxFunctionPointer>(&OtherStartA);
    g_slots[NVTX_CBID_CORE_RangeEnd] = reinterpret_cast<NvtxFunctionPointer>(&OtherEnd);
  };
  std::vector<std::pair<bool, uint64_t>> marks;
  absl::StatusOr<common::StepPattern> pattern =
      common::StepPattern::Compile("^(ProfilerStep#|[Ss]tep[ _#]?)([0-9]+)$");
  ASSERT_TRUE(pattern.ok());
  ASSERT_TRUE(InstallNvtxStepHooks(
      &Get, *pattern, [&](bool begin, uint64_t step) { marks.emplace_back(begin, step); },
      other_tool));
  EXPECT_EQ(g_version, static_cast<uint32_t>(NVTX_VERSION));
  ASSERT_NE(g_slots[NVTX_CBID_CORE_RangePushA], reinterpret_cast<NvtxFunctionPointer>(&OtherPushA));

  // Push/pop, nested: only the step range marks; the other tool sees every call and its
  // results are NVTX's.
  EXPECT_EQ(Slot<nvtxRangePushA_impl_fntype>(NVTX_CBID_CORE_RangePushA)("step 3"), 41);
  EXPECT_EQ(Slot<nvtxRangePushA_impl_fntype>(NVTX_CBID_CORE_RangePushA)("forward"), 41);
  EXPECT_EQ(Slot<nvtxRangePop_impl_fntype>(NVTX_CBID_CORE_RangePop)(), 40);
  EXPECT_EQ(Slot<nvtxRangePop_impl_fntype>(NVTX_CBID_CORE_RangePop)(), 40);
  // PushEx, whose slot held only NVTX's stub: the depth, as NVTX defines it.
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = "ProfilerStep#7";
  EXPECT_EQ(Slot<nvtxRangePushEx_impl_fntype>(NVTX_CBID_CORE_RangePushEx)(&attributes), 0);
  EXPECT_EQ(Slot<nvtxRangePop_impl_fntype>(NVTX_CBID_CORE_RangePop)(), 40);
  // Start/end across threads: the id is the other tool's; a step ends by its id.
  const nvtxRangeId_t id = Slot<nvtxRangeStartA_impl_fntype>(NVTX_CBID_CORE_RangeStartA)("step 9");
  EXPECT_EQ(id, 1000u);
  Slot<nvtxRangeEnd_impl_fntype>(NVTX_CBID_CORE_RangeEnd)(id);
  attributes.message.ascii = "data loading";
  const nvtxRangeId_t other =
      Slot<nvtxRangeStartEx_impl_fntype>(NVTX_CBID_CORE_RangeStartEx)(&attributes);
  Slot<nvtxRangeEnd_impl_fntype>(NVTX_CBID_CORE_RangeEnd)(other);
  // A wide-character name is left alone.
  attributes.messageType = NVTX_MESSAGE_TYPE_UNICODE;
  attributes.message.unicode = L"step 11";
  Slot<nvtxRangePushEx_impl_fntype>(NVTX_CBID_CORE_RangePushEx)(&attributes);
  Slot<nvtxRangePop_impl_fntype>(NVTX_CBID_CORE_RangePop)();

  const std::vector<std::pair<bool, uint64_t>> expected = {{true, 3},  {false, 3}, {true, 7},
                                                           {false, 7}, {true, 9},  {false, 9}};
  EXPECT_EQ(marks, expected);
  const std::vector<std::string> seen = {
      "push step 3", "push forward", "pop",      "pop",
      "pop",         "start step 9", "end 1000", "end " + std::to_string(other),
      "pop"};
  EXPECT_EQ(g_previous, seen);
  EXPECT_EQ(g_stub_calls, 0) << "NVTX's own stubs are never called on";

  // Once per process: a second install changes no slot.
  const NvtxFunctionPointer hooked = g_slots[NVTX_CBID_CORE_RangePushA];
  EXPECT_TRUE(InstallNvtxStepHooks(&Get, *pattern, [](bool, uint64_t) {}));
  EXPECT_EQ(g_slots[NVTX_CBID_CORE_RangePushA], hooked);
}

}  // namespace
}  // namespace podscope::agent::probe
