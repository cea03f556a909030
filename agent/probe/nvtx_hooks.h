// The probe as NVTX's injection library (NVTX_INJECTION64_PATH): NVTX ranges whose names match
// the step pattern become step marks at all times, between capture windows too, where CUPTI (the
// only other way NVTX ranges reach the probe) is off. NVTX loads the injection named in its
// environment at the process's first NVTX call and calls its InitializeInjectionNvtx2 with a
// function that hands out export tables; the core table's slots hold the functions nvtxRangePushA
// and friends jump to. InstallNvtxStepHooks writes the probe's into the slots of the range calls,
// keeping what was there (CUPTI's handlers, when the caller let CUPTI initialise first) and calling
// it after its own, so CUPTI still records every range inside a window.
//
// Covered: nvtxRangePushA/Ex, nvtxRangePop, nvtxRangeStartA/Ex, nvtxRangeEnd (what PyTorch's
// torch.cuda.nvtx and most loops use). Domain ranges and wide-character names are left to CUPTI.
#pragma once

#include <nvtx3/nvToolsExt.h>

#include <cstdint>
#include <functional>

#include "common/step_pattern.h"

namespace podscope::agent::probe {

// `begin` true at a step range's start, false at its end; `step` from the range's name.
using NvtxStepMark = std::function<void(bool begin, uint64_t step)>;

// Installs the hooks through NVTX's export tables (`get`), once per process; later calls change
// nothing and return true. False when NVTX offers no core table (the injection then declines).
// `first` (optional) initialises another tool (CUPTI) through the same tables before the hooks
// go in: a hook calls on only what that tool wrote into its slot. What NVTX itself left there
// (its initialisation stubs, which call the slot again) is never called.
bool InstallNvtxStepHooks(NvtxGetExportTableFunc_t get, common::StepPattern pattern,
                          NvtxStepMark mark, const std::function<void()>& first = {});

}  // namespace podscope::agent::probe
