// Who a training process is, from its launcher's environment: the probe
// registers with this. torchrun sets RANK / LOCAL_RANK / WORLD_SIZE; srun sets SLURM_PROCID /
// SLURM_LOCALID / SLURM_NTASKS; torchrun's variables win when both are there (torchrun under
// srun). The job is PODSCOPE_JOB, else TORCHELASTIC_RUN_ID, else SLURM_JOB_ID.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace podscope::agent::probe {

struct ProbeIdentity {
  int32_t rank = -1;  // -1: the environment does not say
  int32_t local_rank = -1;
  int32_t world_size = -1;
  std::string job;
};

// `getenv` returns null for an unset variable (std::getenv in the probe; a map in tests). A
// value that is not a whole non-negative number (or, for the world size, a positive one) counts
// as unset.
ProbeIdentity IdentityFromEnvironment(const std::function<const char*(const char*)>& getenv);

// The GPU a process of this local rank uses, as the node knows it: "cuda:N" with N the physical
// index NVML uses (CUDA_VISIBLE_DEVICES=4,5 makes local rank 1 "cuda:5"), the UUID when
// CUDA_VISIBLE_DEVICES names GPUs by UUID, or "" when nothing says.
std::string DeviceFromEnvironment(int32_t local_rank,
                                  const std::function<const char*(const char*)>& getenv);

}  // namespace podscope::agent::probe
