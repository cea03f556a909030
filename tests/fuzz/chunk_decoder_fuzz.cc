// Fuzz target for the columnar chunk decoder, which decodes what agents upload: any bytes give a
// trace that validates, or an error. Seeds: chunks encoded from the shared Kineto fixtures.
#include <cstdio>
#include <string>

#include "common/chunk_codec.h"
#include "common/kineto/kineto_importer.h"
#include "common/trace_slice.h"
#include "tests/fuzz/fuzz_seeds.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<podscope::common::WorkerTrace> trace = podscope::common::DecodeChunkFromBytes(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (trace.ok() && !trace->Validate().ok())
    __builtin_trap();  // an accepted chunk must be well-formed
  return 0;
}

namespace podscope::fuzz {

std::vector<std::string> Seeds(const std::vector<std::string>& fixture_paths) {
  std::vector<std::string> seeds;
  common::KinetoImporter importer;
  for (const std::string& path : fixture_paths) {
    absl::StatusOr<common::ImportResult> imported = importer.ImportFile(path);
    if (!imported.ok()) {
      std::fprintf(stderr, "fuzz seeds: %s\n", std::string(imported.status().message()).c_str());
      continue;
    }
    for (common::WorkerTrace& worker : imported->workers) {
      // Small chunks, so that each run is quick: the first few of 64 events each.
      std::vector<common::WorkerTrace> chunks = common::SplitIntoChunks(std::move(worker), 64);
      for (size_t i = 0; i < chunks.size() && i < 3; ++i) {
        seeds.push_back(common::EncodeChunkToBytes(
            chunks[i], {.capture_id = "fuzz", .worker_index = 0, .sequence = i}));
      }
    }
  }
  return seeds;
}

}  // namespace podscope::fuzz
