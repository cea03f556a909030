// Where tests find shared fixtures, the repository, the programs under test and scratch space.
// The absolute paths of this checkout and its build are compiled into test_paths.cc alone, so
// that every other test file compiles to the same object in any clone (and ccache shares it).
#pragma once

#include <string>

namespace podscope::testing {

// ../shared/data beside the repository (overridable with PODSCOPE_SHARED_DATA).
std::string SharedDataDir();
std::string KinetoFixture(
    const std::string& relative);  // e.g. "trace_filter/sampled_rank-0.json.gz"

// The repository's root (scripts/, deploy/ and the sources are read from it).
std::string SourceDir();
// The programs under test, as built beside the tests.
std::string CliBinary();          // podscope
std::string CoordinatorBinary();  // podscope-coordinator
std::string AgentBinary();        // podscope-agent
// Only where the probe is built (CMake found CUDA's headers); otherwise the test aborts.
std::string ProbeLibrary();        // libpodscope_probe.so
std::string FakeTrainingBinary();  // podscope_fake_training
// protoc, as the build found it (tests decode what podscope writes with it).
std::string ProtocBinary();
// Where the web UI tests leave their screenshots and load times.
std::string UiScreenshotDir();

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
