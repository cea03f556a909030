#include "cli/load_inputs.h"

#include "cli/terminal_progress.h"
#include "common/status_macros.h"
#include "common/trace_files.h"

namespace podscope::cli {

namespace {

template <typename Loaded>
absl::StatusOr<Loaded> LoadWithProgress(
    const std::vector<std::string>& inputs,
    absl::StatusOr<Loaded> (*load)(const std::vector<std::string>&, const common::LoadOptions&)) {
  ASSIGN_OR_RETURN(std::vector<std::string> files, common::ExpandTraceInputs(inputs));
  TerminalProgress progress("importing");
  common::LoadOptions options;
  options.progress = [&progress](const common::LoadProgress& p) {
    progress.Update(p.files_done, p.files_total, HumanBytes(p.bytes_done) + " of JSON");
  };
  absl::StatusOr<Loaded> loaded = load(files, options);
  progress.Finish();
  return loaded;
}

}  // namespace

absl::StatusOr<common::Capture> LoadInputsWithProgress(const std::vector<std::string>& inputs) {
  return LoadWithProgress<common::Capture>(inputs, &common::LoadCapture);
}

absl::StatusOr<common::PackedWorkers> LoadPackedInputsWithProgress(
    const std::vector<std::string>& inputs) {
  return LoadWithProgress<common::PackedWorkers>(inputs, &common::LoadPackedWorkers);
}

}  // namespace podscope::cli
