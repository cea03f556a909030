// podscope-coordinator: the daemon people and agents talk to (coordinator/coordinator.h). This
// file only reads the command line, builds the Coordinator, and waits for signals.
#include <signal.h>

#include <iostream>
#include <memory>

#include "CLI/CLI.hpp"
#include "common/daemon_process.h"
#include "common/heap_reuse.h"
#include "common/status_format.h"
#include "common/time_source.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_flags.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace {

// Logs `s` and returns the exit code: 1 a runtime failure, 2 a wrong command line or config.
int Fail(const absl::Status& s, int code) {
  spdlog::error("{}", s);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace podscope::coordinator;
  // Reports take tables of tens of megabytes per worker and free them: kept for the next.
  podscope::common::KeepFreedHeapForReuse(512 << 20);
  // The log, errors included, goes to stderr (stdout carries nothing a daemon's user reads).
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  CLI::App app{"podscope-coordinator: stores traces and serves podscope's REST API"};
  CoordinatorFlags flags;
  AddCoordinatorFlags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (flags.hash_token->parsed()) return RunHashToken(flags.hash_role, flags.hash_name);
  // Blocked before anything else, so that a reload or stop sent while the daemon starts waits
  // for the sigwait below rather than ending the process.
  const sigset_t signals = podscope::common::BlockSignals({SIGINT, SIGTERM, SIGHUP});
  absl::StatusOr<CoordinatorSettings> settings = LoadCoordinatorSettings(flags);
  if (!settings.ok()) return Fail(settings.status(), 2);
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator =
      Coordinator::Create(*std::move(settings), podscope::common::RealTime());
  if (!coordinator.ok()) return Fail(coordinator.status(), 2);
  if (flags.check_config) {
    std::cout << "config OK" << std::endl;
    return 0;
  }
  podscope::common::RaiseDescriptorLimit();
  if (absl::Status s = (*coordinator)->Start(); !s.ok()) return Fail(s, 1);
  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP)
    (*coordinator)->ReloadCredentials();
  spdlog::info("signal {}: finishing in-flight requests", signal_number);
  coordinator->reset();  // stops every part, the last started first
  spdlog::info("stopped");
  return 0;
}
