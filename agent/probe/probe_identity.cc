#include "agent/probe/probe_identity.h"

#include <charconv>
#include <string>
#include <string_view>
#include <vector>

namespace podscope::agent::probe {

namespace {

int32_t Number(const char* text, int32_t minimum) {
  if (text == nullptr) return -1;
  const std::string_view s(text);
  int32_t value = -1;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (error != std::errc() || end != s.data() + s.size() || value < minimum) return -1;
  return value;
}

// The first of the variables that is set to a usable number.
int32_t First(const std::function<const char*(const char*)>& getenv,
              std::initializer_list<const char*> names, int32_t minimum) {
  for (const char* name : names) {
    if (const int32_t v = Number(getenv(name), minimum); v >= 0) return v;
  }
  return -1;
}

}  // namespace

ProbeIdentity IdentityFromEnvironment(const std::function<const char*(const char*)>& getenv) {
  ProbeIdentity id;
  id.rank = First(getenv, {"RANK", "SLURM_PROCID"}, 0);
  id.local_rank = First(getenv, {"LOCAL_RANK", "SLURM_LOCALID"}, 0);
  id.world_size = First(getenv, {"WORLD_SIZE", "SLURM_NTASKS"}, 1);
  for (const char* name : {"PODSCOPE_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"}) {
    const char* value = getenv(name);
    if (value != nullptr && value[0] != '\0') {
      id.job = value;
      break;
    }
  }
  return id;
}

std::string DeviceFromEnvironment(int32_t local_rank,
                                  const std::function<const char*(const char*)>& getenv) {
  const int32_t index = local_rank >= 0 ? local_rank : 0;
  const char* visible = getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr || *visible == '\0')
    return local_rank >= 0 ? "cuda:" + std::to_string(local_rank) : "";
  // The process sees the listed GPUs in order; it uses the one at its local rank (torchrun's
  // convention), or the only one listed.
  std::vector<std::string> entries;
  std::string entry;
  for (const char* c = visible;; ++c) {
    if (*c == ',' || *c == '\0') {
      entries.push_back(entry);
      entry.clear();
      if (*c == '\0') break;
    } else if (*c != ' ') {
      entry += *c;
    }
  }
  const std::string& mine =
      entries.size() == 1 ? entries[0]
                          : (index < static_cast<int32_t>(entries.size()) ? entries[index] : "");
  if (mine.empty()) return "";
  if (mine.find_first_not_of("0123456789") == std::string::npos) return "cuda:" + mine;
  return mine;  // "GPU-<uuid>" or "MIG-<uuid>"
}

}  // namespace podscope::agent::probe
