#include "cli/load_inputs.h"

#include "cli/terminal_progress.h"
#include "common/status_macros.h"
#include "common/trace_files.h"

namespace podscope::cli {

absl::StatusOr<common::Capture> LoadInputsWithProgress(const std::vector<std::string>& inputs) {
  ASSIGN_OR_RETURN(std::vector<std::string> files, common::ExpandTraceInputs(inputs));
  TerminalProgress progress("importing");
  common::LoadOptions options;
  options.progress = [&progress](const common::LoadProgress& p) {
    progress.Update(p.files_done, p.files_total, HumanBytes(p.bytes_done) + " of JSON");
  };
  absl::StatusOr<common::Capture> capture = common::LoadCapture(files, options);
  progress.Finish();
  return capture;
}

}  // namespace podscope::cli
