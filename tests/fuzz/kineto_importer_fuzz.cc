// Fuzz target for the Kineto importer: any bytes must give a result or a clear error, never a
// crash, a hang or a sanitizer report. Seeds: the shared fixtures, cut to their first 64 kB of
// whole events (so each run is quick and each seed a valid trace).
#include <algorithm>
#include <cstdio>
#include <string>

#include "common/file_io.h"
#include "common/kineto/kineto_importer.h"
#include "tests/fuzz/fuzz_seeds.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static podscope::common::KinetoImporter importer(
      podscope::common::ImportOptions{.max_events = 100000, .max_string_bytes = 1 << 16});
  std::string json(reinterpret_cast<const char*>(data), size);
  json.reserve(size + podscope::common::kReadPadding);
  auto result = importer.ImportJson("fuzz.json", json);
  if (result.ok()) {
    for (const auto& worker : result->workers) {
      if (!worker.Validate().ok()) __builtin_trap();  // an accepted trace must be well-formed
    }
  }
  return 0;
}

namespace podscope::fuzz {

std::vector<std::string> Seeds(const std::vector<std::string>& fixture_paths) {
  std::vector<std::string> seeds;
  for (const std::string& path : fixture_paths) {
    absl::StatusOr<std::string> bytes = common::ReadFileMaybeGzip(path);
    if (!bytes.ok()) {
      std::fprintf(stderr, "fuzz seeds: %s\n", std::string(bytes.status().message()).c_str());
      continue;
    }
    const size_t limit = std::min<size_t>(bytes->size(), 64 << 10);
    size_t cut = 0;  // event boundaries look like "}, {" or "},\n  {" depending on the writer
    for (const char* boundary : {"}, {", "},\n  {", "},\n{"}) {
      const size_t at = bytes->rfind(boundary, limit);
      if (at != std::string::npos) cut = std::max(cut, at + 1);
    }
    seeds.push_back(bytes->substr(0, cut) + "]}");
  }
  seeds.push_back(
      R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "ncclKernel_x", "ts": 1.5, "dur": 2, "args": {"stream": 7, "correlation": 1, "grid": [1, 2, 3]}}]})");
  return seeds;
}

}  // namespace podscope::fuzz
