// Where tests find shared fixtures and scratch space.
#pragma once

#include <string>

namespace podscope::testing {

// ../shared/data beside the repository (overridable with PODSCOPE_SHARED_DATA).
std::string SharedDataDir();
std::string KinetoFixture(
    const std::string& relative);  // e.g. "trace_filter/sampled_rank-0.json.gz"

// A fresh directory under the system temp dir, removed by the destructor.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Writes `contents` to File(name) and returns that path.
  std::string Write(const std::string& name, const std::string& contents) const;

 private:
  std::string path_;
};

}  // namespace podscope::testing
