// Finding trace files on disk and loading many of them, in parallel, as one capture.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/capture.h"
#include "common/kineto/kineto_importer.h"
#include "common/packed_workers.h"

namespace podscope::common {

// Expands directories into the trace files they hold (*.json, *.json.gz, not recursive),
// ordered naturally so rank-2 comes before rank-10; plain files pass through. Errors for a
// path that does not exist or a directory with no trace files.
absl::StatusOr<std::vector<std::string>> ExpandTraceInputs(const std::vector<std::string>& inputs);

struct LoadProgress {
  size_t files_done = 0;
  size_t files_total = 0;
  uint64_t bytes_done = 0;  // JSON bytes parsed so far
};

struct LoadOptions {
  ImportOptions import;
  int threads = 0;  // 0: one per hardware thread, at most one per file
  // Called after each file, from the loading threads, serialised by the loader.
  std::function<void(const LoadProgress&)> progress;
};

// Imports every file into one capture. All or nothing: the first failing file (in input
// order) is the error and nothing is returned. Workers without a rank in their trace get
// their position in `files`; two workers claiming one rank is an error.
absl::StatusOr<Capture> LoadCapture(const std::vector<std::string>& files,
                                    const LoadOptions& options = {});

// LoadCapture's workers, each packed as soon as its file is imported (PackedWorkers): memory
// holds one file's decoded workers per loading thread, and the packs.
absl::StatusOr<PackedWorkers> LoadPackedWorkers(const std::vector<std::string>& files,
                                                const LoadOptions& options = {});

}  // namespace podscope::common
