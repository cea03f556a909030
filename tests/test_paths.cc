#include "tests/test_paths.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace podscope::testing {

std::string SharedDataDir() {
  if (const char* env = std::getenv("PODSCOPE_SHARED_DATA"); env != nullptr && *env != '\0') {
    return env;
  }
  return PODSCOPE_SHARED_DATA_DIR;
}

std::string SourceDir() { return PODSCOPE_SOURCE_DIR; }
std::string CliBinary() { return PODSCOPE_CLI_PATH; }
std::string CoordinatorBinary() { return PODSCOPE_COORDINATOR_PATH; }
std::string AgentBinary() { return PODSCOPE_AGENT_PATH; }
std::string ProtocBinary() { return PODSCOPE_PROTOC_PATH; }
std::string UiScreenshotDir() { return PODSCOPE_UI_SCREENSHOT_DIR; }

std::string ProbeLibrary() {
#ifdef PODSCOPE_PROBE_PATH
  return PODSCOPE_PROBE_PATH;
#else
  std::fprintf(stderr, "this build has no probe library (CMake found no CUDA toolkit)\n");
  std::abort();
#endif
}

std::string FakeTrainingBinary() {
#ifdef PODSCOPE_FAKE_TRAINING_PATH
  return PODSCOPE_FAKE_TRAINING_PATH;
#else
  std::fprintf(stderr, "this build has no podscope_fake_training (CMake found no CUDA toolkit)\n");
  std::abort();
#endif
}

std::string KinetoFixture(const std::string& relative) {
  return SharedDataDir() + "/kineto/" + relative;
}

ScratchDir::ScratchDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "podscope-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ScratchDir::Write(const std::string& name, const std::string& contents) const {
  const std::string path = File(name);
  std::ofstream out(path, std::ios::binary);
  out << contents;
  return path;
}

}  // namespace podscope::testing
