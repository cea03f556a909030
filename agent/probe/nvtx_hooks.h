// The probe as NVTX's injection library (NVTX_INJECTION64_PATH): NVTX ranges whose names match
// the step pattern become step marks at all times, between capture windows too, where CUPTI (the
// only other way NVTX ranges reach the probe) is off.
//
// NVTX is header-only: every library built with it (libtorch, NCCL, ...) has its own copy, and
// each copy loads the injection named in the environment at its first NVTX call and calls its
// InitializeInjectionNvtx2 with a function that hands out that copy's export tables. The core
// table's slots hold the functions nvtxRangePushA and friends jump to. The hooks go into the
// slots of the range calls of every copy. CUPTI gets NVTX ranges the same way (it exports
// InitializeInjectionNvtx2 too), and NVTX loads one injection only, so the probe initialises
// CUPTI through each copy's tables as well (ChainNvtxTool) and calls what CUPTI wrote into a slot
// after its own hook: inside windows CUPTI still records every range.
//
// Covered: nvtxRangePushA/Ex, nvtxRangePop, nvtxRangeStartA/Ex, nvtxRangeEnd (what PyTorch's
// torch.cuda.nvtx and most loops use). Domain ranges and wide-character names are left to CUPTI.
#pragma once

#include <nvtx3/nvToolsExt.h>

#include <cstdint>
#include <functional>

#include "common/step_pattern.h"

namespace podscope::agent::probe {

// `begin` true at a step range's start, false at its end; `step` from the range's name; `thread`
// the thread that began it; `tool_sees_it`: the call also went on to a chained tool (CUPTI,
// which records the range inside windows itself).
using NvtxStepMark =
    std::function<void(bool begin, uint64_t step, int64_t thread, bool tool_sees_it)>;

// Puts the hooks into the tables `get` gives (once per copy of NVTX; the pattern and the mark of
// the first call are kept). A tool already chained (ChainNvtxTool) initialises through them first.
// False when NVTX offers no core table.
bool InstallNvtxStepHooks(NvtxGetExportTableFunc_t get, common::StepPattern pattern,
                          NvtxStepMark mark);

// Initialises a tool (CUPTI's InitializeInjectionNvtx2) through every copy's tables the hooks
// are in, and every copy to come, and calls on what it writes into a slot after the probe's
// hook. What NVTX itself left in a slot (its initialisation stubs, which call the slot again) is
// never called on; a copy whose tool handler differs from the first copy's keeps the tool's
// handler in that slot, without the hook.
void ChainNvtxTool(NvtxInitializeInjectionNvtxFunc_t tool_init);

}  // namespace podscope::agent::probe
