// Fuzz target for the Kineto importer: any bytes must give a result or a clear error, never a
// crash, a hang or a sanitizer report. Built for libFuzzer with -DPODSCOPE_LIBFUZZER=ON (clang);
// otherwise fuzz_driver.cc runs it over deterministic mutations of the shared fixtures.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/file_io.h"
#include "common/kineto/kineto_importer.h"

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
