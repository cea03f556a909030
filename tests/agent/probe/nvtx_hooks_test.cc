// The probe's NVTX hooks through export tables laid out as NVTX's loader hands them to an
// injection library (nvtxDetail/nvtxInitDefs.h), for two copies of NVTX in one process (every
// library built with the header-only NVTX has its own). Their slots hold NVTX's initialisation
// stubs (which call the slot again: never to be called on) until another tool (CUPTI) writes its
// own handlers into some of them when it is chained.
#include "agent/probe/nvtx_hooks.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace podscope::agent::probe {
namespace {

struct FakeNvtx {
  NvtxFunctionPointer slots[NVTX_CBID_CORE_SIZE] = {};
  NvtxFunctionPointer* table[NVTX_CBID_CORE_SIZE] = {};
};
FakeNvtx g_copy[2];

int g_stub_calls = 0;
int NVTX_API StubPushA(const char*) { return ++g_stub_calls; }
int NVTX_API StubPop() { return ++g_stub_calls; }

template <int kCopy>
int NVTX_API GetTable(NvtxCallbackModule module, NvtxFunctionTable* out, unsigned* size) {
  if (module != NVTX_CB_MODULE_CORE) return 0;
  *out = g_copy[kCopy].table;
  *size = NVTX_CBID_CORE_SIZE;
  return 1;
}
const NvtxExportTableCallbacks g_callbacks[2] = {{sizeof(NvtxExportTableCallbacks), &GetTable<0>},
                                                 {sizeof(NvtxExportTableCallbacks), &GetTable<1>}};
template <int kCopy>
const void* NVTX_API Get(uint32_t id) {
  return id == NVTX_ETID_CALLBACKS ? &g_callbacks[kCopy] : nullptr;
}

std::vector<std::string> g_tool;  // what the other tool's handlers saw
int NVTX_API ToolPushA(const char* m) {
  g_tool.push_back(std::string("push ") + m);
  return 41;
}
int NVTX_API ToolPop() {
  g_tool.push_back("pop");
  return 40;
}
nvtxRangeId_t NVTX_API ToolStartA(const char* m) {
  g_tool.push_back(std::string("start ") + m);
  return 1000;
}
void NVTX_API ToolEnd(nvtxRangeId_t id) { g_tool.push_back("end " + std::to_string(id)); }

// The tool's own NVTX initialisation, as CUPTI's: its handlers into four slots of the copy.
int NVTX_API ToolInit(NvtxGetExportTableFunc_t get) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size);
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&ToolPushA);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&ToolPop);
  *table[NVTX_CBID_CORE_RangeStartA] = reinterpret_cast<NvtxFunctionPointer>(&ToolStartA);
  *table[NVTX_CBID_CORE_RangeEnd] = reinterpret_cast<NvtxFunctionPointer>(&ToolEnd);
  return 1;
}

template <typename Fn>
Fn Slot(int copy, NvtxCallbackIdCore id) {
  return reinterpret_cast<Fn>(g_copy[copy].slots[id]);
}

using Mark = std::tuple<bool, uint64_t, int64_t, bool>;  // begin, step, thread, tool sees it

TEST(NvtxHooksTest, StepRangesOfEveryCopyBecomeMarksAndReachTheToolChainedBehind) {
  for (FakeNvtx& c : g_copy) {
    for (int i = 0; i < NVTX_CBID_CORE_SIZE; ++i) c.table[i] = &c.slots[i];
    c.slots[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&StubPushA);
    c.slots[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&StubPop);
  }
  std::vector<Mark> marks;
  absl::StatusOr<common::StepPattern> pattern =
      common::StepPattern::Compile("^(ProfilerStep#|[Ss]tep[ _#]?)([0-9]+)$");
  ASSERT_TRUE(pattern.ok());
  const auto mark = [&](bool begin, uint64_t step, int64_t thread, bool tool) {
    marks.emplace_back(begin, step, thread, tool);
  };
  const int64_t me = static_cast<int64_t>(syscall(SYS_gettid));

  // The first copy, before any tool: push/pop nested, only the step range marks; NVTX's
  // depths.
  ASSERT_TRUE(InstallNvtxStepHooks(&Get<0>, *pattern, mark));
  EXPECT_EQ(Slot<nvtxRangePushA_impl_fntype>(0, NVTX_CBID_CORE_RangePushA)("step 1"), 0);
  EXPECT_EQ(Slot<nvtxRangePushA_impl_fntype>(0, NVTX_CBID_CORE_RangePushA)("forward"), 1);
  EXPECT_EQ(Slot<nvtxRangePop_impl_fntype>(0, NVTX_CBID_CORE_RangePop)(), 1);
  EXPECT_EQ(Slot<nvtxRangePop_impl_fntype>(0, NVTX_CBID_CORE_RangePop)(), 0);
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = "ProfilerStep#7";
  EXPECT_EQ(Slot<nvtxRangePushEx_impl_fntype>(0, NVTX_CBID_CORE_RangePushEx)(&attributes), 0);
  EXPECT_EQ(Slot<nvtxRangePop_impl_fntype>(0, NVTX_CBID_CORE_RangePop)(), 0);

  // The tool (CUPTI, once CUDA starts it) is chained: it initialises through the first copy,
  // the hooks go back in front of its handlers, and its results are NVTX's.
  ChainNvtxTool(&ToolInit);
  EXPECT_EQ(Slot<nvtxRangePushA_impl_fntype>(0, NVTX_CBID_CORE_RangePushA)("step 2"), 41);
  EXPECT_EQ(Slot<nvtxRangePop_impl_fntype>(0, NVTX_CBID_CORE_RangePop)(), 40);

  // A second copy of NVTX (another library's): the tool first, then the hooks.
  ASSERT_TRUE(InstallNvtxStepHooks(&Get<1>, *pattern, mark));
  EXPECT_EQ(Slot<nvtxRangePushA_impl_fntype>(1, NVTX_CBID_CORE_RangePushA)("step 3"), 41);
  EXPECT_EQ(Slot<nvtxRangePop_impl_fntype>(1, NVTX_CBID_CORE_RangePop)(), 40);

  // A start/end step range ended on another thread: the step is the starting thread's.
  const nvtxRangeId_t id =
      Slot<nvtxRangeStartA_impl_fntype>(1, NVTX_CBID_CORE_RangeStartA)("step 9");
  EXPECT_EQ(id, 1000u);
  std::thread([] { Slot<nvtxRangeEnd_impl_fntype>(1, NVTX_CBID_CORE_RangeEnd)(1000); }).join();
  // A wide-character name is left to the tool.
  attributes.messageType = NVTX_MESSAGE_TYPE_UNICODE;
  attributes.message.unicode = L"step 11";
  Slot<nvtxRangePushEx_impl_fntype>(1, NVTX_CBID_CORE_RangePushEx)(&attributes);
  Slot<nvtxRangePop_impl_fntype>(1, NVTX_CBID_CORE_RangePop)();

  const std::vector<Mark> expected = {
      {true, 1, me, false}, {false, 1, me, false}, {true, 7, me, false}, {false, 7, me, false},
      {true, 2, me, true},  {false, 2, me, true},  {true, 3, me, true},  {false, 3, me, true},
      {true, 9, me, true},  {false, 9, me, true}};
  EXPECT_EQ(marks, expected);
  const std::vector<std::string> seen = {"push step 2",  "pop",      "push step 3", "pop",
                                         "start step 9", "end 1000", "pop"};
  EXPECT_EQ(g_tool, seen);
  EXPECT_EQ(g_stub_calls, 0) << "NVTX's own stubs are never called on";

  // A copy installs once.
  const NvtxFunctionPointer hooked = g_copy[0].slots[NVTX_CBID_CORE_RangePushA];
  EXPECT_TRUE(InstallNvtxStepHooks(&Get<0>, *pattern, mark));
  EXPECT_EQ(g_copy[0].slots[NVTX_CBID_CORE_RangePushA], hooked);
}

}  // namespace
}  // namespace podscope::agent::probe
