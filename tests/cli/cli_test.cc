// Runs the real `podscope` binary as a user would.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>

#include "common/parse_number.h"
#include "common/str_util.h"
#include "tests/sanitizers.h"
#include "tests/test_paths.h"

namespace podscope::cli {
namespace {

using podscope::testing::KinetoFixture;
using podscope::testing::ScratchDir;

struct RunResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

size_t CountOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

RunResult RunCli(const std::string& args) {
  const std::string command = testing::CliBinary() + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WEXITSTATUS(status), output};
}

TEST(CliTest, InspectJsonReportsCountsStepsAndCollectives) {
  RunResult r = RunCli("inspect --format json " + KinetoFixture("trace_filter"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(R"("rank":0,"world_size":128)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(R"("kernels":1154,"communication_kernels":10)"), std::string::npos);
  EXPECT_NE(r.output.find(R"("steps":[551,552])"), std::string::npos);
  EXPECT_NE(r.output.find(R"("collectives_by_op":{"AllGather":2,"AllReduce":4,"AllToAll":4})"),
            std::string::npos);
}

TEST(CliTest, InspectTableIsReadable) {
  RunResult r = RunCli("inspect " + KinetoFixture("trace_filter"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("551-552"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1 collectives: AllGather x2 AllReduce x4 AllToAll x4"),
            std::string::npos);
}

TEST(CliTest, ExportThenInspectTheExportGivesTheSameCounts) {
  ScratchDir dir;
  const std::string merged = dir.File("merged.json.gz");
  RunResult exported = RunCli("export " + KinetoFixture("dlrm_8rank") + " -o " + merged);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_NE(exported.output.find("8 ranks"), std::string::npos) << exported.output;
  RunResult original = RunCli("inspect --format json " + KinetoFixture("dlrm_8rank"));
  RunResult again = RunCli("inspect --format json " + merged);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  // Same counts per rank; only "source" (and the process field) differ.
  auto counts = [](const std::string& json) {
    std::string all;
    for (size_t at = json.find("\"counts\""); at != std::string::npos;
         at = json.find("\"counts\"", at + 1)) {
      all += json.substr(at, json.find('}', at) - at) + "\n";
    }
    return all;
  };
  EXPECT_EQ(counts(original.output), counts(again.output));
  EXPECT_EQ(std::count(again.output.begin(), again.output.end(), '\n'), 1);
}

TEST(CliTest, BadInputExitsNonZeroWithTheFileInTheMessage) {
  ScratchDir dir;
  const std::string bad = dir.Write("rank-0.json", "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": ");
  RunResult r = RunCli("inspect " + bad);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("rank-0.json: byte offset"), std::string::npos) << r.output;
  RunResult missing = RunCli("inspect " + dir.File("missing"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("no such file or directory"), std::string::npos) << missing.output;
  RunResult usage = RunCli("export " + bad);
  EXPECT_NE(usage.exit_code, 0);
  EXPECT_NE(usage.output.find("--output is required"), std::string::npos) << usage.output;
}

}  // namespace
}  // namespace podscope::cli

namespace podscope::cli {
namespace {

TEST(CliAnalyzeTest, HtaTemporalJsonReproducesHtaFigures) {
  RunResult r = RunCli("analyze --window hta --report temporal --format json " +
                       KinetoFixture("trace_filter"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(
      r.output.find(
          R"({"rank":0,"idle_ns":321378000,"compute_ns":106252000,"non_compute_ns":172428000,"kernel_time_ns":600058000,"overlap_pct":11.81)"),
      std::string::npos)
      << r.output;
  EXPECT_NE(
      r.output.find(
          R"({"rank":1,"idle_ns":328671000,"compute_ns":135548000,"non_compute_ns":136455000,"kernel_time_ns":600674000,"overlap_pct":20.05)"),
      std::string::npos);
  EXPECT_NE(
      r.output.find(
          R"({"device":0,"stream":7,"host_wait_ns":213825000,"kernel_wait_ns":1985000,"other_ns":261740000})"),
      std::string::npos);
}

TEST(CliAnalyzeTest, HtaTemporalJsonReproducesHtaFiguresOnDlrm) {
  RunResult r =
      RunCli("analyze --window hta --report temporal --format json " + KinetoFixture("dlrm_8rank"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(
      r.output.find(
          R"({"rank":0,"idle_ns":6419000,"compute_ns":1034000,"non_compute_ns":5556000,"kernel_time_ns":13009000,"overlap_pct":4.50)"),
      std::string::npos)
      << r.output;
  EXPECT_NE(
      r.output.find(
          R"({"rank":7,"idle_ns":8308000,"compute_ns":1059000,"non_compute_ns":1600000,"kernel_time_ns":10967000,"overlap_pct":9.51)"),
      std::string::npos);
}

TEST(CliAnalyzeTest, AllReportsNestUnderTheirNames) {
  RunResult r = RunCli("analyze --format json " + KinetoFixture("dlrm_8rank"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* key :
       {"{\"summary\":{\"job\":", ",\"steps\":{\"workers\":[", ",\"pod\":{\"steps\":[",
        ",\"overlap\":{", ",\"communication\":{", ",\"stragglers\":{\"stragglers\":[",
        ",\"allreduce\":{", ",\"kernels\":{\"pod\":[", ",\"temporal\":{\"window\":\"steps\""}) {
    EXPECT_NE(r.output.find(key), std::string::npos) << key;
  }
  EXPECT_NE(r.output.find("\"comm_wait_ns\""), std::string::npos);
}

TEST(CliAnalyzeTest, TablesAndBadOptions) {
  RunResult tables =
      RunCli("analyze --report steps --report stragglers " + KinetoFixture("trace_filter"));
  ASSERT_EQ(tables.exit_code, 0) << tables.output;
  EXPECT_NE(tables.output.find("== steps"), std::string::npos);
  EXPECT_NE(tables.output.find("== stragglers"), std::string::npos);
  RunResult bad_report = RunCli("analyze --report nonsense " + KinetoFixture("trace_filter"));
  EXPECT_EQ(bad_report.exit_code, 2);
  EXPECT_NE(bad_report.output.find("unknown report \"nonsense\""), std::string::npos)
      << bad_report.output;
  RunResult bad_regex = RunCli("analyze --step-pattern '([' " + KinetoFixture("trace_filter"));
  EXPECT_EQ(bad_regex.exit_code, 2);
  EXPECT_NE(bad_regex.output.find("not a valid regex"), std::string::npos) << bad_regex.output;
}

}  // namespace
}  // namespace podscope::cli

namespace podscope::cli {
namespace {

// Inputs that are not one job are refused (unless insisted on) and warned about;
// simulate does not write into a folder that holds an earlier run.
// A one-GPU job traced by the PyTorch profiler without its step schedule: no ProfilerStep, no
// NVTX, no collectives. Its steps come from the period of its kernel launches.
TEST(CliAnalyzeTest, AOneGpuTraceWithoutMarksGetsStepsFromItsKernelLaunches) {
  ScratchDir dir;
  std::string events;
  int64_t correlation = 0;
  const std::array<const char*, 4> loop = {"sm90_xmma_gemm_bf16", "vectorized_elementwise_kernel",
                                           "sm90_xmma_gemm_bf16_dgrad",
                                           "multi_tensor_apply_kernel"};
  for (int step = 0; step < 8; ++step) {
    // 4.4 ms a step: the four launches 0.3 ms apart, then the host's pause.
    for (size_t i = 0; i < loop.size(); ++i) {
      const double at = 1'000'000.0 + step * 4400.0 + static_cast<double>(i) * 300.0;
      ++correlation;
      events += common::StrCat(
          events.empty() ? "" : ",",
          R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":)", at,
          R"(,"dur":5,"args":{"correlation":)", correlation, R"(}},)",
          R"({"ph":"X","cat":"kernel","name":")", loop[i], R"(","pid":0,"tid":7,"ts":)", at + 20,
          R"(,"dur":250,"args":{"stream":7,"correlation":)", correlation, R"(,"device":0}})");
    }
  }
  const std::string path = dir.Write("rank-0.json", R"({"traceEvents":[)" + events + "]}");
  const RunResult r = RunCli("analyze --report steps --format json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(R"("step_source":"launches")"), std::string::npos) << r.output;
  // Eight periods seen, seven of them closed by the next one's first launch. Each step's device
  // span runs from its first kernel's start to its last one's end (0.9 + 0.25 ms), and the device
  // idles the rest of the 4.4 ms before the next step.
  EXPECT_EQ(CountOf(r.output, R"("span_ns":1150000)"), 7u) << r.output;
  EXPECT_EQ(CountOf(r.output, R"("before_ns":3250000)"), 6u) << r.output;
}

TEST(CliAnalyzeTest, InputsThatAreNotOneJobAreRefusedOrWarnedAbout) {
  ScratchDir dir;
  ASSERT_EQ(RunCli("simulate --ranks 8 --steps 2 -o " + dir.File("eight")).exit_code, 0);
  ASSERT_EQ(RunCli("simulate --ranks 2 --steps 2 -o " + dir.File("two")).exit_code, 0);
  const RunResult again = RunCli("simulate --ranks 2 --steps 2 -o " + dir.File("two"));
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("is not empty (pass --overwrite"), std::string::npos) << again.output;
  EXPECT_EQ(RunCli("simulate --ranks 2 --steps 2 --overwrite -o " + dir.File("two")).exit_code, 0);

  const std::string mixed = dir.File("eight/rank-3.json.gz") + " " + dir.File("two/rank-1.json.gz");
  const RunResult refused = RunCli("analyze --report pod " + mixed);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find("these inputs are not one job:\n  the ranks disagree on the world "
                                "size (2: ranks 1; 8: ranks 3)"),
            std::string::npos)
      << refused.output;
  const RunResult insisted = RunCli("analyze --report pod --format json --allow-mixed " + mixed);
  EXPECT_EQ(insisted.exit_code, 0) << insisted.output;
  EXPECT_NE(
      insisted.output.find(
          R"x("warnings":["the ranks disagree on the world size (2: ranks 1; 8: ranks 3)"]})x"),
      std::string::npos)
      << insisted.output;
  const RunResult clean = RunCli("analyze --report pod --format json " + dir.File("eight"));
  EXPECT_NE(clean.output.find(R"("warnings":[]})"), std::string::npos)
      << clean.output.substr(clean.output.size() - 200);
}

// --preset picks the step's shape; options given beside it override it, before or after it.
TEST(CliSimulateTest, APresetShapesTheStepAndGivenOptionsOverrideIt) {
  ScratchDir dir;
  auto events = [](const RunResult& run) -> int64_t {
    const size_t at = run.output.find("steps (");
    if (at == std::string::npos) return -1;
    return common::ParseInt(run.output.substr(at + 7, run.output.find(' ', at + 7) - at - 7))
        .value_or(-1);
  };
  const RunResult dense =
      RunCli("simulate --preset dense --ranks 2 --steps 20 -o " + dir.File("d"));
  ASSERT_EQ(dense.exit_code, 0) << dense.output;
  const RunResult light =
      RunCli("simulate --preset light --ranks 2 --steps 20 -o " + dir.File("l"));
  const RunResult fewer = RunCli(
      "simulate --forward-kernels 10 --preset dense --ranks 2 --steps 20 -o " + dir.File("f"));
  // The dense preset has 160 forward kernels; given before it, 10 still win. Each forward
  // kernel is three events in the files, on each of 2 ranks in each of 20 steps.
  EXPECT_EQ(events(dense) - events(fewer), 2 * 20 * (160 - 10) * 3) << dense.output << fewer.output;
  EXPECT_GT(events(dense), 10 * events(light)) << light.output;
  const RunResult summary = RunCli("analyze " + dir.File("d"));
  EXPECT_NE(summary.output.find("step time (ms): min 4.4"), std::string::npos) << summary.output;
  const RunResult unknown = RunCli("simulate --preset heavy -o " + dir.File("u"));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("unknown preset \"heavy\" (default, light or dense)"),
            std::string::npos)
      << unknown.output;
}

// A table analysis without --report is the summary, and at 1024 ranks it fits one screen (the
// full reports print thousands of lines). 128 ranks under a sanitizer: the same code, and the
// summary's length does not grow with the ranks.
TEST(CliAnalyzeTest, TheDefaultTableIsASummaryThatFitsAScreenAt1024Ranks) {
  ScratchDir dir;
  const int ranks = podscope::testing::SanitizedOr(128, 1024);
  const int straggler = ranks * 3 / 10;
  ASSERT_EQ(RunCli(common::StrCat("simulate --ranks ", ranks,
                                  " --steps 3 --forward-kernels 4 --backward-kernels 8 --buckets 2 "
                                  "--straggler ",
                                  straggler, ":1.2 -o ", dir.File("job")))
                .exit_code,
            0);
  const RunResult r = RunCli("analyze --clocks aligned " + dir.File("job"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 60) << r.output;
  EXPECT_NE(r.output.find(common::StrCat("== summary: job (unnamed), ", ranks,
                                         " ranks, 3 steps (0..2, from markers)")),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(common::StrCat("top straggler  rank ", straggler)), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("stragglers: 1 (step-time loss "), std::string::npos) << r.output;
  const RunResult json =
      RunCli("analyze --report summary --format json --clocks aligned " + dir.File("job"));
  EXPECT_NE(json.output.find(common::StrCat(R"({"job":"","ranks":)", ranks, ",")),
            std::string::npos)
      << json.output.substr(0, 200);
}

// One set of definitions: every overlap% follows from the columns printed beside it
// (it did not: "communication" is the part not hidden), and the allreduce table gives its
// efficiency when a link bandwidth is given, in MB throughout.
TEST(CliAnalyzeTest, PrintedFiguresFollowFromTheirColumns) {
  const RunResult overlap = RunCli("analyze --report overlap " + KinetoFixture("dlrm_8rank"));
  ASSERT_EQ(overlap.exit_code, 0) << overlap.output;
  std::istringstream lines(overlap.output);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    double rank, step, computation, communication, hidden, comm_kernels, pct;
    if (!(fields >> rank >> step >> computation >> communication >> hidden >> comm_kernels >> pct))
      continue;
    ++rows;
    EXPECT_NEAR(comm_kernels, hidden + communication, 0.0015) << line;
    if (comm_kernels > 0) {
      EXPECT_NEAR(pct, 100 * hidden / comm_kernels, 0.05 + 100 * 0.0015 / comm_kernels) << line;
    }
  }
  EXPECT_EQ(rows, 8);  // 8 ranks, one step each
  const RunResult bandwidth =
      RunCli("analyze --report allreduce --link-gbytes-per-s 200 " + KinetoFixture("dlrm_8rank"));
  EXPECT_NE(bandwidth.output.find("efficiency%"), std::string::npos) << bandwidth.output;
  EXPECT_NE(bandwidth.output.find("allreduce_MB"), std::string::npos) << bandwidth.output;
  EXPECT_EQ(bandwidth.output.find("gradient AllReduce per step"), std::string::npos)
      << bandwidth.output;
  const RunResult pod = RunCli("analyze --report pod " + KinetoFixture("dlrm_8rank"));
  EXPECT_NE(pod.output.find("dev%    compute    overlap       comm"), std::string::npos)
      << pod.output.substr(0, 400);
}

// The long tables show the worst workers first, --top of them, and take --ranks and
// --steps.
TEST(CliAnalyzeTest, LongTablesShowTheWorstWorkersFirstAndFilter) {
  ScratchDir dir;
  ASSERT_EQ(
      RunCli("simulate --ranks 64 --steps 2 --forward-kernels 4 --backward-kernels 8 --buckets 2 "
             "--straggler 9:1.5:input -o " +
             dir.File("job"))
          .exit_code,
      0);
  const RunResult top =
      RunCli("analyze --report steps --top 5 --clocks aligned " + dir.File("job"));
  ASSERT_EQ(top.exit_code, 0) << top.output;
  EXPECT_NE(top.output.find("... 59 more workers (--top 0 shows all, --ranks picks some)"),
            std::string::npos)
      << top.output;
  std::istringstream lines(top.output);
  std::string line;
  std::set<int> ranks;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    int rank, step;
    double span;
    if (fields >> rank >> step >> span) ranks.insert(rank);
  }
  EXPECT_EQ(ranks.size(), 5u);
  const RunResult picked =
      RunCli("analyze --report steps --ranks 3,5 --steps 1 --clocks aligned " + dir.File("job"));
  ASSERT_EQ(picked.exit_code, 0) << picked.output;
  EXPECT_NE(picked.output.find("\n    3       1 "), std::string::npos) << picked.output;
  EXPECT_NE(picked.output.find("\n    5       1 "), std::string::npos) << picked.output;
  EXPECT_EQ(picked.output.find("       0 "), std::string::npos) << picked.output;
  EXPECT_EQ(RunCli("analyze --report steps --ranks x " + dir.File("job")).exit_code, 2);
  EXPECT_EQ(RunCli("analyze --report steps --steps 5-2 " + dir.File("job")).exit_code, 2);
}

// Export takes --ranks, --steps and --window.
TEST(CliExportTest, ExportsFilterByRanksStepsAndWindow) {
  ScratchDir dir;
  ASSERT_EQ(
      RunCli(
          "simulate --ranks 4 --steps 4 --forward-kernels 4 --backward-kernels 8 --buckets 2 -o " +
          dir.File("job"))
          .exit_code,
      0);
  const RunResult cut =
      RunCli("export " + dir.File("job") + " --ranks 2-3 --steps 1-2 -o " + dir.File("cut.json"));
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  const RunResult shown = RunCli("inspect --format json " + dir.File("cut.json"));
  EXPECT_EQ(CountOf(shown.output, "\"rank\":"), 2u) << shown.output.substr(0, 400);
  EXPECT_NE(shown.output.find("\"rank\":2"), std::string::npos);
  EXPECT_NE(shown.output.find("\"steps\":[1,2]"), std::string::npos) << shown.output.substr(0, 600);
  EXPECT_EQ(RunCli("export " + dir.File("job") + " --window 50ms-120ms -o " + dir.File("w.json"))
                .exit_code,
            0);
  const RunResult none =
      RunCli("export " + dir.File("job") + " --ranks 9 -o " + dir.File("x.json"));
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.output.find("no input holds ranks 9"), std::string::npos) << none.output;
  EXPECT_EQ(
      RunCli("export " + dir.File("job") + " --window 5-1s -o " + dir.File("x.json")).exit_code, 2);
}

TEST(CliSimulateTest, SimulatedStragglerIsNamedByAnalyze) {
  ScratchDir dir;
  RunResult sim =
      RunCli("simulate --ranks 8 --steps 4 --seed 9 --straggler 5:1.05 -o " + dir.File("job"));
  ASSERT_EQ(sim.exit_code, 0) << sim.output;
  EXPECT_NE(sim.output.find("stragglers injected: rank 5 compute x1.05"), std::string::npos)
      << sim.output;
  RunResult r =
      RunCli("analyze --report stragglers --format json --clocks aligned " + dir.File("job"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(R"({"stragglers":[{"rank":5,"host":"")"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(R"("category":"compute+overlap","evidence":{)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(R"("reason":"caused_delay")"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(R"("step_time_loss_ns":)"), std::string::npos) << r.output;
  RunResult bad = RunCli("simulate --ranks 4 --straggler 9:1.1 -o " + dir.File("x"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("straggler rank 9 is not below --ranks 4"), std::string::npos)
      << bad.output;
}

}  // namespace
}  // namespace podscope::cli

#include <simdjson.h>

#include "common/file_io.h"

namespace podscope::cli {
namespace {

// A simulated job's files say their rank the way HTA reads it, and describe their
// H100; the gpu report computes utilization, SM efficiency and occupancy from that, and the
// kernel view marks the Hopper GEMMs as Tensor Core kernels.
TEST(CliGpuReportTest, ASimulatedJobHasGpuEfficiencyAndTensorCoreKernels) {
  ScratchDir dir;
  ASSERT_EQ(
      RunCli(
          "simulate --ranks 2 --steps 3 --forward-kernels 4 --backward-kernels 8 --buckets 2 -o " +
          dir.File("job"))
          .exit_code,
      0);
  absl::StatusOr<std::string> file = common::ReadFileMaybeGzip(dir.File("job/rank-1.json.gz"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_NE(file->find(R"("distributedInfo":{"backend":"nccl","rank": 1,"world_size": 2})"),
            std::string::npos)
      << file->substr(0, 300);
  EXPECT_NE(file->find(R"("name":"NVIDIA H100 80GB HBM3")"), std::string::npos);
  EXPECT_NE(file->find(R"("computeMajor":9,"computeMinor":0,"numSms":132)"), std::string::npos);

  const RunResult gpu = RunCli("analyze --report gpu --format json " + dir.File("job"));
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(gpu.output).get(doc), simdjson::SUCCESS) << gpu.output;
  simdjson::dom::array workers = doc["workers"];
  ASSERT_EQ(workers.size(), 2u);
  for (simdjson::dom::element w : workers) {
    const double utilization = w["gpu_utilization"];
    const double sm = w["sm_efficiency"];
    const double occupancy = w["achieved_occupancy"];
    EXPECT_GT(utilization, 0.2);
    EXPECT_LE(utilization, 1.0);
    EXPECT_GT(sm, 0.0);
    EXPECT_LE(sm, utilization);  // min(blocks per SM, 1) over busy time at most
    EXPECT_GT(occupancy, 0.0);
    EXPECT_LE(occupancy, 1.0);
    EXPECT_EQ(uint64_t(w["kernels_without_occupancy"]), 0u);
    EXPECT_EQ(simdjson::dom::array(w["steps"]).size(), 3u);
  }

  const RunResult kernels = RunCli("analyze --report kernels --format json " + dir.File("job"));
  ASSERT_EQ(kernels.exit_code, 0) << kernels.output;
  EXPECT_NE(
      kernels.output.find(
          R"("name":"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas","class":"compute")"),
      std::string::npos);
  EXPECT_NE(kernels.output.find(R"(_cublas","class":"compute")"), std::string::npos);
  ASSERT_EQ(parser.parse(kernels.output).get(doc), simdjson::SUCCESS);
  bool tensor_core_gemm = false;
  for (simdjson::dom::element k : doc["pod"].get_array()) {
    const std::string_view name = k["name"];
    if (name.starts_with("sm90_xmma_gemm")) tensor_core_gemm = bool(k["tensor_core"]);
    if (name.starts_with("ncclDevKernel")) {
      EXPECT_FALSE(bool(k["tensor_core"]));
    }
  }
  EXPECT_TRUE(tensor_core_gemm);
  const double share = doc["tensor_cores"]["share"];
  EXPECT_GT(share, 0.0);
  EXPECT_LT(share, 1.0);

  const RunResult table = RunCli("analyze --report gpu " + dir.File("job"));
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("== gpu: pod medians: GPU utilization "), std::string::npos)
      << table.output;
  EXPECT_NE(table.output.find("NVIDIA H100 80GB HBM3"), std::string::npos) << table.output;
}

}  // namespace
}  // namespace podscope::cli

namespace podscope::cli {
namespace {

// The operator view attributes device time on the dlrm fixture, whose runtime events'
// External ids match no operator; a rank with a slow dataloader is input-bound, and the overview
// recommends on it with its numbers.
TEST(CliGpuReportTest, OperatorsInputAndTheOverviewOnRealAndSimulatedJobs) {
  const RunResult operators =
      RunCli("analyze --report operators --format json " + KinetoFixture("dlrm_8rank"));
  ASSERT_EQ(operators.exit_code, 0) << operators.output;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(operators.output).get(doc), simdjson::SUCCESS) << operators.output;
  simdjson::dom::array pod = doc["pod"];
  ASSERT_GT(pod.size(), 5u);
  const int64_t top_device = int64_t(pod.at(0)["device_self_ns"]);
  EXPECT_GT(top_device, 0);
  for (simdjson::dom::element op : pod) {
    EXPECT_LE(int64_t(op["host_self_ns"]), int64_t(op["host_total_ns"]));
    EXPECT_LE(int64_t(op["device_self_ns"]), int64_t(op["device_total_ns"]));
    EXPECT_LE(int64_t(op["device_self_ns"]), top_device);  // worst first
    EXPECT_GE(simdjson::dom::array(op["costliest"]).size(), 1u);
  }
  EXPECT_EQ(simdjson::dom::array(doc["workers"]).size(), 8u);

  ScratchDir dir;
  ASSERT_EQ(
      RunCli("simulate --ranks 4 --steps 4 --forward-kernels 4 --backward-kernels 8 --buckets 2 "
             "--straggler 2:4:input -o " +
             dir.File("job"))
          .exit_code,
      0);
  const RunResult input = RunCli("analyze --report input --format json " + dir.File("job"));
  ASSERT_EQ(input.exit_code, 0) << input.output;
  ASSERT_EQ(parser.parse(input.output).get(doc), simdjson::SUCCESS) << input.output;
  simdjson::dom::array bound = doc["input_bound"];
  ASSERT_GE(bound.size(), 1u) << input.output;
  EXPECT_EQ(int64_t(bound.at(0)), 2) << input.output;
  for (simdjson::dom::element w : doc["workers"].get_array()) {
    const double share = w["input_share"];
    if (int64_t(w["rank"]) == 2) {
      EXPECT_GT(share, 0.05);
    }
    EXPECT_EQ(simdjson::dom::array(w["steps"]).size(), 4u);
  }

  const RunResult overview = RunCli("analyze --report overview --format json " + dir.File("job"));
  ASSERT_EQ(overview.exit_code, 0) << overview.output;
  ASSERT_EQ(parser.parse(overview.output).get(doc), simdjson::SUCCESS) << overview.output;
  bool input_named = false;
  for (simdjson::dom::element r : doc["recommendations"].get_array()) {
    EXPECT_GT(simdjson::dom::object(r["evidence"]).size(),
              0u);  // no recommendation without its number
    const std::string_view rule = r["rule"];
    if (rule == "input_bound" || rule == "straggler") {
      for (simdjson::dom::element rank : r["ranks"].get_array())
        input_named = input_named || int64_t(rank) == 2;
    }
  }
  EXPECT_TRUE(input_named) << overview.output;
  const RunResult table = RunCli("analyze --report overview " + dir.File("job"));
  EXPECT_NE(table.output.find("recommendations, most step time at stake first:"), std::string::npos)
      << table.output;
  EXPECT_NE(table.output.find("    evidence: "), std::string::npos) << table.output;
}

}  // namespace
}  // namespace podscope::cli

namespace podscope::cli {
namespace {

// The memory view from Kineto's [memory] instants, with the device's size from its
// deviceProperties: the peak, the headroom, and the operator that allocated.
TEST(CliGpuReportTest, TheMemoryViewNamesThePeakAndTheHeadroom) {
  ScratchDir dir;
  const std::string trace = dir.Write(
      "rank-0.json", R"json({"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
  "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85899345920, "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
  "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 10, "dur": 10},
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12,
     "args": {"Device Type": 1, "Device Id": 0, "Bytes": 68719476736, "Total Allocated": 75161927680, "Total Reserved": 77309411328}},
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 30,
     "args": {"Device Type": 1, "Device Id": 0, "Bytes": -68719476736, "Total Allocated": 6442450944, "Total Reserved": 77309411328}}
  ]})json");
  const RunResult json = RunCli("analyze --report memory --format json " + trace);
  ASSERT_EQ(json.exit_code, 0) << json.output;
  EXPECT_NE(
      json.output.find(
          R"("peak_allocated_bytes":75161927680,"peak_time_ns":12000,"peak_reserved_bytes":77309411328,"total_memory_bytes":85899345920,"headroom_bytes":8589934592,)"),
      std::string::npos)
      << json.output;
  EXPECT_NE(json.output.find(
                R"("top_operators":[{"name":"aten::empty","allocations":1,"bytes":68719476736}])"),
            std::string::npos)
      << json.output;
  EXPECT_NE(
      json.output.find(
          R"("nearest_oom":{"rank":0,"device":0,"peak_bytes":77309411328,"total_memory_bytes":85899345920,"headroom_bytes":8589934592})"),
      std::string::npos)
      << json.output;
  const RunResult table = RunCli("analyze --report memory " + trace);
  EXPECT_NE(
      table.output.find(
          "nearest to out of memory: rank 0 device 0, peak 72.00 of 80.00 GiB (8.00 GiB free)"),
      std::string::npos)
      << table.output;
}

}  // namespace
}  // namespace podscope::cli
