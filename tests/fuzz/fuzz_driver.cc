// Runs LLVMFuzzerTestOneInput without libFuzzer: each seed file (the shared fixtures), then
// deterministic mutations of it — truncations, byte flips, inserted JSON punctuation, repeated
// slices. Bounded in count so it fits in the test suite; under ASan/UBSan it finds memory errors.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "common/kineto/kineto_importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

}  // namespace

int main(int argc, char** argv) {
  const int mutations = argc > 1 ? std::atoi(argv[1]) : 200;
  std::vector<std::string> seeds;
  for (int i = 2; i < argc; ++i) {
    auto bytes = podscope::common::ReadFileMaybeGzip(argv[i]);
    if (!bytes.ok()) {
      std::fprintf(stderr, "fuzz driver: %s\n", std::string(bytes.status().message()).c_str());
      return 1;
    }
    // Keep the whole events of the first 64 kB and close the document, so each run is quick
    // and the seed itself is a valid trace that mutations start from.
    const std::string& text = *bytes;
    const size_t limit = std::min<size_t>(text.size(), 64 << 10);
    // Event boundaries look like "}, {" or "},\n  {" depending on the writer.
    size_t cut = 0;
    for (const char* boundary : {"}, {", "},\n  {", "},\n{"}) {
      const size_t at = text.rfind(boundary, limit);
      if (at != std::string::npos) cut = std::max(cut, at + 1);
    }
    const std::string head = text.substr(0, cut);
    seeds.push_back(head + "]}");
  }
  seeds.push_back(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "ncclKernel_x", "ts": 1.5, "dur": 2, "args": {"stream": 7, "correlation": 1, "grid": [1, 2, 3]}}]})");
  std::mt19937_64 rng(12345);
  static const char kPunctuation[] = "{}[],:\"\\0-.eE ";
  size_t runs = 0;
  for (const std::string& seed : seeds) {
    std::string padded = seed;
    padded.reserve(seed.size() + podscope::common::kReadPadding);
    podscope::common::KinetoImporter check;
    if (!check.ImportJson("seed", padded).ok()) {
      std::fprintf(stderr, "fuzz driver: a seed is not a valid trace\n");
      return 1;
    }
    Run(seed);
    ++runs;
    for (int m = 0; m < mutations; ++m) {
      std::string input = seed;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !input.empty(); ++e) {
        const size_t at = rng() % input.size();
        switch (rng() % 4) {
          case 0: input.resize(at); break;                                           // truncate
          case 1: input[at] = static_cast<char>(rng() & 0xff); break;                // flip a byte
          case 2: input.insert(at, 1, kPunctuation[rng() % (sizeof(kPunctuation) - 1)]); break;
          case 3: input.insert(at, input.substr(at, std::min<size_t>(rng() % 256, input.size() - at))); break;
        }
      }
      Run(input);
      ++runs;
    }
  }
  std::printf("fuzz driver: %zu inputs, no crash\n", runs);
  return 0;
}
