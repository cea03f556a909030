// Every fuzz target says how its seed corpus comes from the shared fixtures (and hand-written
// inputs). The suite's driver (mutation_driver.cc) runs the seeds and bounded deterministic
// mutations of them; `--write-seeds DIR` writes them out as a corpus for libFuzzer
// (scripts/fuzz.sh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace podscope::fuzz {

// The seeds of this target, from fixture files given on the command line (may be none).
std::vector<std::string> Seeds(const std::vector<std::string>& fixture_paths);

}  // namespace podscope::fuzz
