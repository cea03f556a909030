// Runs a fuzz target without libFuzzer: each seed, then deterministic mutations of it
// (truncations, byte flips, inserted bytes, repeated slices). Bounded in count so it fits in the
// test suite; under ASan/UBSan it finds memory errors. Usage:
//   TARGET MUTATIONS_PER_SEED [FIXTURE...]       run
//   TARGET --write-seeds DIR [FIXTURE...]        write the seed corpus for libFuzzer
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/parse_number.h"
#include "tests/fuzz/fuzz_seeds.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MUTATIONS|--write-seeds DIR [FIXTURE...]\n", argv[0]);
    return 2;
  }
  const bool write = std::string(argv[1]) == "--write-seeds";
  const int first_fixture = write ? 3 : 2;
  if (write && argc < 3) return 2;
  std::vector<std::string> fixtures(argv + std::min(first_fixture, argc), argv + argc);
  const std::vector<std::string> seeds = podscope::fuzz::Seeds(fixtures);
  if (seeds.empty()) {
    std::fprintf(stderr, "fuzz driver: no seeds\n");
    return 1;
  }
  if (write) {
    std::filesystem::create_directories(argv[2]);
    for (size_t i = 0; i < seeds.size(); ++i) {
      std::ofstream(std::string(argv[2]) + "/seed-" + std::to_string(i), std::ios::binary)
          << seeds[i];
    }
    std::printf("fuzz driver: wrote %zu seeds to %s\n", seeds.size(), argv[2]);
    return 0;
  }
  const int mutations = static_cast<int>(podscope::common::ParseInt(argv[1]).value());
  std::mt19937_64 rng(12345);
  size_t runs = 0;
  auto run = [&runs](const std::string& input) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    ++runs;
  };
  for (const std::string& seed : seeds) {
    run(seed);
    for (int m = 0; m < mutations; ++m) {
      std::string input = seed;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !input.empty(); ++e) {
        const size_t at = rng() % input.size();
        switch (rng() % 4) {
          case 0:
            input.resize(at);
            break;
          case 1:
            input[at] = static_cast<char>(rng() & 0xff);
            break;
          case 2:
            input.insert(at, 1, static_cast<char>(rng() & 0xff));
            break;
          case 3:
            input.insert(at, input.substr(at, std::min<size_t>(rng() % 256, input.size() - at)));
            break;
        }
      }
      run(input);
    }
  }
  std::printf("fuzz driver: %zu inputs, no crash\n", runs);
  return 0;
}
