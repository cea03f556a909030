#include "cli/inspect_command.h"

#include <cstdio>
#include <map>

#include "cli/load_inputs.h"
#include "common/json_writer.h"
#include "fmt/format.h"

namespace podscope::cli {
namespace {

using common::WorkerTrace;

// Step numbers as compact ranges: "551-552", "1,3,5-9".
std::string StepRanges(const std::vector<int64_t>& steps) {
  std::string out;
  for (size_t i = 0; i < steps.size();) {
    size_t j = i;
    while (j + 1 < steps.size() && steps[j + 1] == steps[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", steps[i]) : fmt::format("{}-{}", steps[i], steps[j]);
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

std::map<std::string, size_t> CollectivesByOp(const WorkerTrace& w) {
  std::map<std::string, size_t> by_op;
  for (common::CollectiveOp op : w.collectives.op)
    ++by_op[std::string(common::CollectiveOpName(op))];
  return by_op;
}

size_t CommunicationKernels(const WorkerTrace& w) {
  size_t n = 0;
  for (common::KernelClass c : w.kernels.kernel_class)
    n += c == common::KernelClass::kCommunication;
  return n;
}

void PrintTable(const common::Capture& capture) {
  std::printf("%-5s %-6s %-28s %8s %6s %7s %8s %10s %6s %-12s %12s\n", "rank", "world", "process",
              "kernels", "nccl", "memcpy", "runtime", "host_spans", "colls", "steps", "span");
  for (const WorkerTrace& w : capture.workers) {
    const common::EventCounts c = w.Counts();
    const auto [lo, hi] = w.TimeRange();
    std::string who = w.info.host.empty() ? w.info.process_name : w.info.host;
    if (who.size() > 28) who = who.substr(0, 25) + "...";
    std::printf("%-5d %-6d %-28s %8zu %6zu %7zu %8zu %10zu %6zu %-12s %10.3f ms\n", w.info.rank,
                w.info.world_size, who.c_str(), c.kernels, CommunicationKernels(w), c.memcpys,
                c.runtime_calls, c.host_spans, c.collectives, StepRanges(w.steps.number).c_str(),
                (hi - lo) / 1e6);
  }
  std::printf("\n");
  for (const WorkerTrace& w : capture.workers) {
    std::string line;
    for (const auto& [op, n] : CollectivesByOp(w)) line += fmt::format(" {} x{}", op, n);
    std::printf("rank %d collectives:%s  (%s)\n", w.info.rank,
                line.empty() ? " none" : line.c_str(), w.info.source.c_str());
  }
}

void PrintJson(const common::Capture& capture) {
  common::JsonWriter out;
  out.BeginObject().Key("workers").BeginArray();
  for (const WorkerTrace& w : capture.workers) {
    const common::EventCounts c = w.Counts();
    const auto [lo, hi] = w.TimeRange();
    out.BeginObject().Key("rank").Int(w.info.rank).Key("world_size").Int(w.info.world_size);
    out.Key("source").String(w.info.source).Key("process_name").String(w.info.process_name);
    out.Key("host").String(w.info.host);
    out.Key("counts").BeginObject().Key("kernels").Uint(c.kernels);
    out.Key("communication_kernels").Uint(CommunicationKernels(w));
    out.Key("memcpys").Uint(c.memcpys).Key("runtime_calls").Uint(c.runtime_calls);
    out.Key("host_spans").Uint(c.host_spans).Key("collectives").Uint(c.collectives);
    out.Key("steps").Uint(c.steps).Key("host_samples").Uint(c.host_samples);
    out.Key("memory_events").Uint(c.memory_events).EndObject();
    out.Key("steps").BeginArray();
    for (size_t s = 0; s < w.steps.size(); ++s) out.Int(w.steps.number[s]);
    out.EndArray().Key("collectives_by_op").BeginObject();
    for (const auto& [op, n] : CollectivesByOp(w)) out.Key(op).Uint(n);
    out.EndObject().Key("start_ns").Int(lo).Key("end_ns").Int(hi).EndObject();
  }
  out.EndArray().EndObject().EndLine();
  std::fwrite(out.buffer().data(), 1, out.size(), stdout);
}

}  // namespace

CLI::App* AddInspectCommand(CLI::App& app, InspectCommandOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show, per rank, event counts by kind, steps, collectives and time range");
  cmd->add_option("inputs", options.inputs, "Trace directories or files (*.json, *.json.gz)")
      ->required();
  cmd->add_option("--format", options.format, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  return cmd;
}

int RunInspectCommand(const InspectCommandOptions& options) {
  absl::StatusOr<common::Capture> capture = LoadInputsWithProgress(options.inputs);
  if (!capture.ok()) {
    std::fprintf(stderr, "podscope inspect: %s\n", std::string(capture.status().message()).c_str());
    return 1;
  }
  if (options.format == "json") {
    PrintJson(*capture);
  } else {
    PrintTable(*capture);
  }
  return 0;
}

}  // namespace podscope::cli
