#include "agent/probe/nvtx_hooks.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace podscope::agent::probe {
namespace {

constexpr size_t kMaxDepth = 256;          // a thread's pushed ranges followed
constexpr size_t kMaxStartedSteps = 1024;  // start/end step ranges open at once
constexpr size_t kMaxCopies = 64;          // copies of NVTX in one process

enum Hooked { kPushA, kPushEx, kPop, kStartA, kStartEx, kEnd, kHookedCount };
constexpr NvtxCallbackIdCore kSlotIds[kHookedCount] = {
    NVTX_CBID_CORE_RangePushA,  NVTX_CBID_CORE_RangePushEx,  NVTX_CBID_CORE_RangePop,
    NVTX_CBID_CORE_RangeStartA, NVTX_CBID_CORE_RangeStartEx, NVTX_CBID_CORE_RangeEnd};

struct Copy {
  NvtxGetExportTableFunc_t get = nullptr;
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
};

struct StartedStep {
  uint64_t step = 0;
  int64_t thread = 0;
};

struct Hooks {
  // The chained tool's handler per slot (null: none); read on every call, written under mu.
  std::array<std::atomic<NvtxFunctionPointer>, kHookedCount> next{};
  std::array<NvtxFunctionPointer, kHookedCount> ours{};
  std::optional<common::StepPattern> pattern;  // set once, before any hook is in a slot
  NvtxStepMark mark;
  std::atomic<uint64_t> next_range_id{1};
  std::atomic<size_t> started_count{0};
  absl::Mutex mu;
  std::vector<Copy> copies ABSL_GUARDED_BY(mu);
  NvtxInitializeInjectionNvtxFunc_t tool_init ABSL_GUARDED_BY(mu) = nullptr;
  absl::flat_hash_map<nvtxRangeId_t, StartedStep> started_steps ABSL_GUARDED_BY(mu);
};

Hooks& TheHooks() {
  static auto* hooks = new Hooks;  // never freed: NVTX may call in until the process exits
  return *hooks;
}

int64_t ThisThread() {
  thread_local const int64_t id = static_cast<int64_t>(syscall(SYS_gettid));
  return id;
}

template <typename Fn>
Fn Next(Hooked slot) {
  return reinterpret_cast<Fn>(TheHooks().next[slot].load(std::memory_order_acquire));
}

// The step a range's name marks, or -1.
int64_t StepOf(const char* name) {
  if (name == nullptr) return -1;
  const common::StepPattern::Match m = TheHooks().pattern->Find(std::string_view(name));
  return m.number ? *m.number : -1;
}

const char* AsciiMessage(const nvtxEventAttributes_t* a) {
  return a != nullptr && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : nullptr;
}

// Each thread's pushed ranges: the step each marks (-1: none), so that a pop ends its step; past
// kMaxDepth only counted, so that pops pair with the right pushes.
struct PushStack {
  std::vector<int64_t> steps;
  size_t beyond = 0;
};
PushStack& Pushed() {
  thread_local PushStack pushed;
  return pushed;
}

int Pushing(int64_t step, bool tool_sees_it) {
  PushStack& pushed = Pushed();
  if (pushed.steps.size() >= kMaxDepth) {
    ++pushed.beyond;
  } else {
    pushed.steps.push_back(step);
    if (step >= 0) TheHooks().mark(true, static_cast<uint64_t>(step), ThisThread(), tool_sees_it);
  }
  return static_cast<int>(pushed.steps.size() + pushed.beyond) - 1;
}

int NVTX_API PushA(const char* message) {
  const auto next = Next<nvtxRangePushA_impl_fntype>(kPushA);
  const int depth = Pushing(StepOf(message), next != nullptr);
  return next != nullptr ? next(message) : depth;
}

int NVTX_API PushEx(const nvtxEventAttributes_t* attributes) {
  const auto next = Next<nvtxRangePushEx_impl_fntype>(kPushEx);
  const int depth = Pushing(StepOf(AsciiMessage(attributes)), next != nullptr);
  return next != nullptr ? next(attributes) : depth;
}

int NVTX_API Pop() {
  const auto next = Next<nvtxRangePop_impl_fntype>(kPop);
  PushStack& pushed = Pushed();
  int depth = NVTX_NO_PUSH_POP_TRACKING;
  if (pushed.beyond > 0) {
    --pushed.beyond;
    depth = static_cast<int>(pushed.steps.size() + pushed.beyond);
  } else if (!pushed.steps.empty()) {
    const int64_t step = pushed.steps.back();
    pushed.steps.pop_back();
    depth = static_cast<int>(pushed.steps.size());
    if (step >= 0) {
      TheHooks().mark(false, static_cast<uint64_t>(step), ThisThread(), next != nullptr);
    }
  }
  return next != nullptr ? next() : depth;
}

nvtxRangeId_t Started(nvtxRangeId_t id, int64_t step, bool tool_sees_it) {
  if (step < 0) return id;
  Hooks& hooks = TheHooks();
  {
    absl::MutexLock lock(&hooks.mu);
    // Ranges started and never ended would fill it: those are forgotten.
    if (hooks.started_steps.size() >= kMaxStartedSteps) hooks.started_steps.clear();
    hooks.started_steps[id] = StartedStep{static_cast<uint64_t>(step), ThisThread()};
    hooks.started_count.store(hooks.started_steps.size(), std::memory_order_release);
  }
  hooks.mark(true, static_cast<uint64_t>(step), ThisThread(), tool_sees_it);
  return id;
}

nvtxRangeId_t NVTX_API StartA(const char* message) {
  const auto next = Next<nvtxRangeStartA_impl_fntype>(kStartA);
  const nvtxRangeId_t id = next != nullptr ? next(message) : TheHooks().next_range_id.fetch_add(1);
  return Started(id, StepOf(message), next != nullptr);
}

nvtxRangeId_t NVTX_API StartEx(const nvtxEventAttributes_t* attributes) {
  const auto next = Next<nvtxRangeStartEx_impl_fntype>(kStartEx);
  const nvtxRangeId_t id =
      next != nullptr ? next(attributes) : TheHooks().next_range_id.fetch_add(1);
  return Started(id, StepOf(AsciiMessage(attributes)), next != nullptr);
}

void NVTX_API End(nvtxRangeId_t id) {
  Hooks& hooks = TheHooks();
  const auto next = Next<nvtxRangeEnd_impl_fntype>(kEnd);
  if (hooks.started_count.load(std::memory_order_acquire) > 0) {
    std::optional<StartedStep> started;
    {
      absl::MutexLock lock(&hooks.mu);
      if (auto it = hooks.started_steps.find(id); it != hooks.started_steps.end()) {
        started = it->second;
        hooks.started_steps.erase(it);
        hooks.started_count.store(hooks.started_steps.size(), std::memory_order_release);
      }
    }
    // The thread that began it: a range may end on another.
    if (started) hooks.mark(false, started->step, started->thread, next != nullptr);
  }
  if (next != nullptr) next(id);
}

NvtxFunctionPointer* SlotOf(const Copy& copy, Hooked slot) {
  const auto id = static_cast<unsigned>(kSlotIds[slot]);
  return id < copy.size ? copy.table[id] : nullptr;
}

// Lets the tool initialise through `copy`'s tables, then puts the hooks (back) into its slots,
// chaining what the tool wrote there.
void HookCopy(Hooks& hooks, const Copy& copy) ABSL_EXCLUSIVE_LOCKS_REQUIRED(hooks.mu) {
  std::array<NvtxFunctionPointer, kHookedCount> before{};
  for (int s = 0; s < kHookedCount; ++s) {
    if (NvtxFunctionPointer* slot = SlotOf(copy, static_cast<Hooked>(s))) before[s] = *slot;
  }
  if (hooks.tool_init != nullptr) hooks.tool_init(copy.get);
  for (int s = 0; s < kHookedCount; ++s) {
    NvtxFunctionPointer* slot = SlotOf(copy, static_cast<Hooked>(s));
    if (slot == nullptr) continue;
    const NvtxFunctionPointer now = *slot;
    if (now != before[s] && now != hooks.ours[s]) {  // the tool's handler
      NvtxFunctionPointer expected = nullptr;
      if (!hooks.next[s].compare_exchange_strong(expected, now) && expected != now) continue;
    }
    *slot = hooks.ours[s];
  }
}

}  // namespace

bool InstallNvtxStepHooks(NvtxGetExportTableFunc_t get, common::StepPattern pattern,
                          NvtxStepMark mark) {
  if (get == nullptr) return false;
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->GetModuleFunctionTable == nullptr) return false;
  Copy copy{get};
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &copy.table, &copy.size) == 0 ||
      copy.table == nullptr) {
    return false;
  }
  Hooks& hooks = TheHooks();
  absl::MutexLock lock(&hooks.mu);
  for (const Copy& c : hooks.copies) {
    if (c.get == get) return true;
  }
  if (hooks.copies.size() >= kMaxCopies) return false;
  if (!hooks.pattern) {
    hooks.pattern = std::move(pattern);
    hooks.mark = std::move(mark);
    hooks.ours = {reinterpret_cast<NvtxFunctionPointer>(&PushA),
                  reinterpret_cast<NvtxFunctionPointer>(&PushEx),
                  reinterpret_cast<NvtxFunctionPointer>(&Pop),
                  reinterpret_cast<NvtxFunctionPointer>(&StartA),
                  reinterpret_cast<NvtxFunctionPointer>(&StartEx),
                  reinterpret_cast<NvtxFunctionPointer>(&End)};
  }
  HookCopy(hooks, copy);
  hooks.copies.push_back(copy);
  if (const auto* version =
          static_cast<const NvtxExportTableVersionInfo*>(get(NVTX_ETID_VERSIONINFO));
      version != nullptr && version->SetInjectionNvtxVersion != nullptr) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }
  return true;
}

void ChainNvtxTool(NvtxInitializeInjectionNvtxFunc_t tool_init) {
  Hooks& hooks = TheHooks();
  absl::MutexLock lock(&hooks.mu);
  if (tool_init == nullptr || hooks.tool_init != nullptr) return;
  hooks.tool_init = tool_init;
  for (const Copy& copy : hooks.copies) HookCopy(hooks, copy);
}

}  // namespace podscope::agent::probe
