#include "cli/simulate_command.h"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/terminal_progress.h"
#include "common/chrome/chrome_exporter.h"
#include "common/str_util.h"

namespace podscope::cli {

CLI::App* AddSimulateCommand(CLI::App& app, SimulateCommandOptions& o) {
  sim::WorkloadOptions& w = o.workload;
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Write a simulated training job as Kineto trace files (one per rank)");
  // First: CLI11 stores options in the order they are declared, so the options given beside
  // the preset override it.
  cmd->add_option_function<std::string>(
         "--preset",
         [&w](const std::string& name) {
           if (absl::Status s = sim::ApplyPreset(name, &w); !s.ok())
             throw CLI::ValidationError("--preset", std::string(s.message()));
         },
         "Step shape: default (97 ms, 200 kernels), light (a tenth of the kernels) or dense (4.5 "
         "ms, 500 kernels: a real rank's event rate)")
      ->default_str("default");
  cmd->add_option("--ranks", w.ranks, "Ranks (GPUs)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--steps", w.steps, "Training steps")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--seed", w.seed, "Random seed (same seed, same traces)")->capture_default_str();
  cmd->add_option("--straggler", o.stragglers,
                  "RANK:FACTOR[:compute|input|launch], e.g. 5:1.05 (repeatable)");
  cmd->add_option("--ranks-per-host", w.ranks_per_host, "Ranks per host")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--clock-offset-ms", w.clock_offset_ms,
                  "Per-host clock offset, uniform in +-X ms")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--drift-ppm", w.drift_ppm, "Per-host clock drift, uniform in +-X ppm")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--params", w.params, "Model parameters (gradient AllReduce size)")
      ->capture_default_str();
  cmd->add_option("--link-gbytes-per-s", w.link_gbytes_per_s,
                  "Per-rank bus bandwidth, GB/s (1e9 bytes/s)")
      ->capture_default_str();
  cmd->add_option("--forward-kernels", w.forward_kernels, "Forward kernels per step")
      ->capture_default_str();
  cmd->add_option("--backward-kernels", w.backward_kernels, "Backward kernels per step")
      ->capture_default_str();
  cmd->add_option("--buckets", w.buckets, "Gradient buckets (AllReduces) per step")
      ->capture_default_str();
  cmd->add_option("--jitter", w.jitter, "Relative jitter of kernel and input times")
      ->capture_default_str();
  cmd->add_option("-o,--output", o.output_dir, "Output directory (created)")->required();
  cmd->add_flag("--plain-json", o.plain_json, "Write .json instead of .json.gz");
  cmd->add_flag(
      "--overwrite", o.overwrite,
      "Write into a folder that is not empty (its rank-*.json[.gz] files are removed first)");
  return cmd;
}

int RunSimulateCommand(SimulateCommandOptions& o) {
  for (const std::string& spec : o.stragglers) {
    absl::StatusOr<sim::Slowdown> s = sim::ParseSlowdown(spec);
    if (!s.ok()) {
      std::fprintf(stderr, "podscope simulate: %s\n", std::string(s.status().message()).c_str());
      return 2;
    }
    o.workload.slowdowns.push_back(*s);
  }
  if (absl::Status status = sim::ValidateOptions(o.workload); !status.ok()) {
    std::fprintf(stderr, "podscope simulate: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  std::error_code ec;
  // Stale rank files from an earlier run would be analysed with this one as one job.
  if (std::filesystem::is_directory(o.output_dir, ec) &&
      !std::filesystem::is_empty(o.output_dir, ec)) {
    if (!o.overwrite) {
      std::fprintf(
          stderr,
          "podscope simulate: %s is not empty (pass --overwrite to replace its rank files)\n",
          o.output_dir.c_str());
      return 2;
    }
    for (const auto& entry : std::filesystem::directory_iterator(o.output_dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("rank-") && (name.ends_with(".json") || name.ends_with(".json.gz"))) {
        std::filesystem::remove(entry.path(), ec);
      }
    }
  }
  std::filesystem::create_directories(o.output_dir, ec);
  if (ec) {
    std::fprintf(stderr, "podscope simulate: cannot create %s: %s\n", o.output_dir.c_str(),
                 ec.message().c_str());
    return 1;
  }
  const sim::Workload job = sim::SimulateJob(o.workload);
  const size_t n = job.capture.workers.size();
  TerminalProgress progress("writing");
  std::atomic<size_t> next{0}, done{0};
  std::atomic<uint64_t> events{0};
  std::vector<absl::Status> errors(n);
  auto work = [&] {
    for (size_t r = next.fetch_add(1); r < n; r = next.fetch_add(1)) {
      const common::WorkerTrace& w = job.capture.workers[r];
      const std::string path =
          common::StrCat(o.output_dir, "/rank-", r, o.plain_json ? ".json" : ".json.gz");
      common::ExportOptions options;
      options.layout = common::ExportLayout::kKineto;
      absl::StatusOr<common::ExportStats> stats = common::ExportChromeTraceFile(
          common::CaptureView(std::vector<const common::WorkerTrace*>{&w}), path, options);
      if (!stats.ok()) errors[r] = stats.status();
      events += w.Counts().Total();
      progress.Update(++done, n, "ranks");
    }
  };
  const size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), n);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  progress.Finish();
  for (const absl::Status& e : errors) {
    if (!e.ok()) {
      std::fprintf(stderr, "podscope simulate: %s\n", std::string(e.message()).c_str());
      return 1;
    }
  }
  std::string injected;
  for (const sim::Slowdown& s : o.workload.slowdowns) {
    injected += common::StrCat(injected.empty() ? "" : ", ", "rank ", s.rank, " ",
                               sim::SlowdownKindName(s.kind), " x", s.factor);
  }
  std::printf("wrote %zu ranks x %d steps (%llu events) to %s; stragglers injected: %s\n", n,
              o.workload.steps, static_cast<unsigned long long>(events.load()),
              o.output_dir.c_str(), injected.empty() ? "none" : injected.c_str());
  return 0;
}

}  // namespace podscope::cli
