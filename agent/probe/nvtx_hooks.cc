#include "agent/probe/nvtx_hooks.h"

#include <atomic>
#include <mutex>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace podscope::agent::probe {
namespace {

constexpr size_t kMaxDepth = 256;          // a thread's pushed ranges followed
constexpr size_t kMaxStartedSteps = 1024;  // start/end step ranges open at once

// What the slots held before: called after the probe's own work, their results returned.
struct Next {
  nvtxRangePushA_impl_fntype push_a = nullptr;
  nvtxRangePushEx_impl_fntype push_ex = nullptr;
  nvtxRangePop_impl_fntype pop = nullptr;
  nvtxRangeStartA_impl_fntype start_a = nullptr;
  nvtxRangeStartEx_impl_fntype start_ex = nullptr;
  nvtxRangeEnd_impl_fntype end = nullptr;
};

struct Hooks {
  Next next;
  std::optional<common::StepPattern> pattern;
  NvtxStepMark mark;
  std::atomic<uint64_t> next_range_id{1};
  absl::Mutex mu;
  absl::flat_hash_map<nvtxRangeId_t, uint64_t> started_steps ABSL_GUARDED_BY(mu);
};

Hooks& TheHooks() {
  static auto* hooks = new Hooks;  // never freed: NVTX may call in until the process exits
  return *hooks;
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

// Each thread's pushed ranges: the step each marks (-1: none), so that a pop ends its step.
std::vector<int64_t>& Pushed() {
  thread_local std::vector<int64_t> pushed;
  return pushed;
}

void Pushing(int64_t step) {
  std::vector<int64_t>& pushed = Pushed();
  if (pushed.size() < kMaxDepth) pushed.push_back(step);
  if (step >= 0) TheHooks().mark(true, static_cast<uint64_t>(step));
}

int NVTX_API PushA(const char* message) {
  Pushing(StepOf(message));
  const auto next = TheHooks().next.push_a;
  return next != nullptr ? next(message) : static_cast<int>(Pushed().size()) - 1;
}

int NVTX_API PushEx(const nvtxEventAttributes_t* attributes) {
  Pushing(StepOf(AsciiMessage(attributes)));
  const auto next = TheHooks().next.push_ex;
  return next != nullptr ? next(attributes) : static_cast<int>(Pushed().size()) - 1;
}

int NVTX_API Pop() {
  std::vector<int64_t>& pushed = Pushed();
  int depth = NVTX_NO_PUSH_POP_TRACKING;
  if (!pushed.empty()) {
    const int64_t step = pushed.back();
    pushed.pop_back();
    depth = static_cast<int>(pushed.size());
    if (step >= 0) TheHooks().mark(false, static_cast<uint64_t>(step));
  }
  const auto next = TheHooks().next.pop;
  return next != nullptr ? next() : depth;
}

nvtxRangeId_t Started(nvtxRangeId_t id, int64_t step) {
  if (step < 0) return id;
  Hooks& hooks = TheHooks();
  {
    absl::MutexLock lock(&hooks.mu);
    if (hooks.started_steps.size() >= kMaxStartedSteps) return id;  // ranges never ended
    hooks.started_steps[id] = static_cast<uint64_t>(step);
  }
  hooks.mark(true, static_cast<uint64_t>(step));
  return id;
}

nvtxRangeId_t NVTX_API StartA(const char* message) {
  Hooks& hooks = TheHooks();
  const nvtxRangeId_t id = hooks.next.start_a != nullptr
                               ? hooks.next.start_a(message)
                               : hooks.next_range_id.fetch_add(1, std::memory_order_relaxed);
  return Started(id, StepOf(message));
}

nvtxRangeId_t NVTX_API StartEx(const nvtxEventAttributes_t* attributes) {
  Hooks& hooks = TheHooks();
  const nvtxRangeId_t id = hooks.next.start_ex != nullptr
                               ? hooks.next.start_ex(attributes)
                               : hooks.next_range_id.fetch_add(1, std::memory_order_relaxed);
  return Started(id, StepOf(AsciiMessage(attributes)));
}

void NVTX_API End(nvtxRangeId_t id) {
  Hooks& hooks = TheHooks();
  std::optional<uint64_t> step;
  {
    absl::MutexLock lock(&hooks.mu);
    if (auto it = hooks.started_steps.find(id); it != hooks.started_steps.end()) {
      step = it->second;
      hooks.started_steps.erase(it);
    }
  }
  if (step) hooks.mark(false, *step);
  if (hooks.next.end != nullptr) hooks.next.end(id);
}

constexpr NvtxCallbackIdCore kHooked[] = {NVTX_CBID_CORE_RangePushA,   NVTX_CBID_CORE_RangePushEx,
                                          NVTX_CBID_CORE_RangePop,     NVTX_CBID_CORE_RangeStartA,
                                          NVTX_CBID_CORE_RangeStartEx, NVTX_CBID_CORE_RangeEnd};

NvtxFunctionPointer SlotValue(NvtxFunctionTable table, unsigned size, NvtxCallbackIdCore id) {
  return static_cast<unsigned>(id) < size && table[id] != nullptr ? *table[id] : nullptr;
}

// Swaps `ours` into slot `id` of `table`; what another tool put there since `before` was read
// goes into `*previous`.
template <typename Fn>
void Hook(NvtxFunctionTable table, unsigned size, NvtxCallbackIdCore id,
          const absl::flat_hash_map<int, NvtxFunctionPointer>& before, Fn ours, Fn* previous) {
  if (static_cast<unsigned>(id) >= size || table[id] == nullptr) return;
  const NvtxFunctionPointer now = *table[id];
  auto it = before.find(static_cast<int>(id));
  *previous = it != before.end() && it->second != now ? reinterpret_cast<Fn>(now) : nullptr;
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(ours);
}

}  // namespace

bool InstallNvtxStepHooks(NvtxGetExportTableFunc_t get, common::StepPattern pattern,
                          NvtxStepMark mark, const std::function<void()>& first) {
  static std::once_flag once;
  static bool installed = false;
  std::call_once(once, [&] {
    if (get == nullptr) return;
    const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
    if (callbacks == nullptr || callbacks->GetModuleFunctionTable == nullptr) return;
    NvtxFunctionTable table = nullptr;
    unsigned size = 0;
    if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) == 0 ||
        table == nullptr) {
      return;
    }
    absl::flat_hash_map<int, NvtxFunctionPointer> before;
    for (NvtxCallbackIdCore id : kHooked) before[static_cast<int>(id)] = SlotValue(table, size, id);
    if (first) first();
    Hooks& hooks = TheHooks();
    hooks.pattern = std::move(pattern);
    hooks.mark = std::move(mark);
    Hook(table, size, NVTX_CBID_CORE_RangePushA, before, &PushA, &hooks.next.push_a);
    Hook(table, size, NVTX_CBID_CORE_RangePushEx, before, &PushEx, &hooks.next.push_ex);
    Hook(table, size, NVTX_CBID_CORE_RangePop, before, &Pop, &hooks.next.pop);
    Hook(table, size, NVTX_CBID_CORE_RangeStartA, before, &StartA, &hooks.next.start_a);
    Hook(table, size, NVTX_CBID_CORE_RangeStartEx, before, &StartEx, &hooks.next.start_ex);
    Hook(table, size, NVTX_CBID_CORE_RangeEnd, before, &End, &hooks.next.end);
    if (const auto* version =
            static_cast<const NvtxExportTableVersionInfo*>(get(NVTX_ETID_VERSIONINFO));
        version != nullptr && version->SetInjectionNvtxVersion != nullptr) {
      version->SetInjectionNvtxVersion(NVTX_VERSION);
    }
    installed = true;
  });
  return installed;
}

}  // namespace podscope::agent::probe
