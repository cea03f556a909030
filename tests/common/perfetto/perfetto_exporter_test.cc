// The Perfetto export decodes with protoc against the schema it documents, with every event
// once, slices that nest on their tracks, interned names and launch flows.
#include "common/perfetto/perfetto_exporter.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "common/file_io.h"
#include "common/trace_files.h"
#include "tests/test_paths.h"

namespace podscope::common {
namespace {

using podscope::testing::ScratchDir;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// `protoc --decode` of the export: its text form, or why it failed.
std::string Decode(const std::string& path) {
  const std::string command =
      podscope::testing::ProtocBinary() + " --decode=perfetto.protos.Trace -I " +
      podscope::testing::SourceDir() + "/common/perfetto perfetto_trace.proto < " + path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 65536> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  EXPECT_EQ(WEXITSTATUS(status), 0) << output.substr(0, 2000);
  return output;
}

absl::StatusOr<ExportStats> ExportTo(const CaptureView& view, const std::string& path) {
  ViewWorkers workers(view);
  return ExportPerfettoTraceFile(workers, path);
}

TEST(PerfettoExporterTest, EveryEventOfARealTraceDecodesOnce) {
  absl::StatusOr<Capture> capture =
      LoadCapture(*ExpandTraceInputs({podscope::testing::KinetoFixture("trace_filter")}));
  ASSERT_TRUE(capture.ok()) << capture.status();
  const CaptureView view(*capture);
  ScratchDir dir;
  absl::StatusOr<ExportStats> stats = ExportTo(view, dir.File("trace.pb"));
  ASSERT_TRUE(stats.ok()) << stats.status();
  size_t slices = 0, instants = 0;
  for (const WorkerTrace* w : view.workers()) {
    slices +=
        w->kernels.size() + w->memcpys.size() + w->runtime_calls.size() + w->host_spans.size();
    instants += w->memory_events.size();
  }
  ASSERT_GT(slices, 1000u);
  const std::string text = Decode(dir.File("trace.pb"));
  EXPECT_EQ(Count(text, "type: TYPE_SLICE_BEGIN"), slices);
  EXPECT_EQ(Count(text, "type: TYPE_SLICE_END"), slices);
  EXPECT_EQ(Count(text, "type: TYPE_INSTANT"), instants);
  EXPECT_EQ(stats->events, slices + instants);
  EXPECT_EQ(Count(text, "  process {"), view.size());
  EXPECT_EQ(stats->bytes, std::filesystem::file_size(dir.File("trace.pb")));
  // Each worker's sequence starts its interned state once.
  EXPECT_EQ(Count(text, "sequence_flags: 3"), view.size());
}

// One worker by hand: a launch and its kernel, two host calls that overlap without nesting (the
// second goes to a lane of its own), a nested span, and an allocator instant.
TEST(PerfettoExporterTest, SlicesNestOnTheirTracksAndFlowsJoinLaunchToKernel) {
  Capture capture;
  WorkerTrace& w = capture.workers.emplace_back();
  w.info.rank = 3;
  w.info.host = "node-9";
  w.info.pid = 4242;
  w.clock.offset_ns = 1'000;  // aligned = own + 1000
  const NameId launch = w.strings.Intern("cudaLaunchKernel");
  const NameId sync = w.strings.Intern("cudaStreamSynchronize");
  const NameId gemm = w.strings.Intern("sm90_gemm");
  const NameId step = w.strings.Intern("ProfilerStep#1");
  const NameId forward = w.strings.Intern("forward");
  auto call = [&](TimeNs start, TimeNs end, NameId name, int64_t correlation) {
    RuntimeCallTable& r = w.runtime_calls;
    r.start.push_back(start), r.end.push_back(end), r.thread.push_back(7);
    r.name.push_back(name), r.correlation.push_back(correlation), r.external_id.push_back(-1);
    r.api_kind.push_back(ApiKind::kRuntime);
  };
  call(100, 200, launch, 5);
  call(150, 250, sync, 6);  // overlaps the launch without nesting in it
  KernelTable& k = w.kernels;
  k.start = {300}, k.end = {900}, k.device = {0}, k.stream = {7}, k.name = {gemm};
  k.correlation = {5}, k.grid_x = {4}, k.grid_y = {2}, k.grid_z = {1}, k.block_x = {128};
  k.block_y = {1}, k.block_z = {1}, k.registers_per_thread = {96}, k.shared_memory_bytes = {0};
  k.kernel_class = {KernelClass::kCompute};
  HostSpanTable& h = w.host_spans;
  h.start = {50, 60}, h.end = {400, 300}, h.thread = {7, 7}, h.name = {step, forward};
  h.category = {HostSpanCategory::kAnnotation, HostSpanCategory::kOp};
  h.step = {1, kNoStep}, h.external_id = {-1, 11};
  MemoryEventTable& m = w.memory_events;
  m.time = {120}, m.thread = {7}, m.device = {0}, m.bytes = {4096}, m.total_allocated = {8192};
  m.total_reserved = {-1};
  ASSERT_TRUE(w.Validate().ok()) << w.Validate();
  ScratchDir dir;
  const CaptureView view(capture);
  absl::StatusOr<ExportStats> stats = ExportTo(view, dir.File("one.pb"));
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->events, 6u);
  const std::string text = Decode(dir.File("one.pb"));

  // Tracks: the process, thread 7, the GPU stream, and the overlapping lane beside thread 7.
  EXPECT_NE(text.find("process_name: \"rank 3 (node-9)\""), std::string::npos) << text;
  EXPECT_NE(text.find("thread_name: \"GPU 0 stream 7\""), std::string::npos);
  EXPECT_NE(text.find("name: \"thread 7 (overlapping 1)\""), std::string::npos);
  EXPECT_EQ(Count(text, "track_descriptor {"), 4u);

  // Time order on the aligned clock; on thread 7: step [1050,1400] holds forward [1060,1300]
  // which holds the launch [1100,1200]; the instant at 1120; the sync on its own lane; the kernel
  // [1300,1900] on its stream (at 1300, tracks are written in the order they were found).
  std::vector<std::string> order;
  for (size_t at = text.find("timestamp: "); at != std::string::npos;
       at = text.find("timestamp: ", at + 1)) {
    const size_t type = text.find("type: ", at);
    order.push_back(text.substr(at + 11, text.find('\n', at) - at - 11) + " " +
                    text.substr(type + 6, text.find('\n', type) - type - 6));
  }
  const std::vector<std::string> expected = {
      "1050 TYPE_SLICE_BEGIN", "1060 TYPE_SLICE_BEGIN", "1100 TYPE_SLICE_BEGIN",
      "1120 TYPE_INSTANT",     "1150 TYPE_SLICE_BEGIN", "1200 TYPE_SLICE_END",
      "1250 TYPE_SLICE_END",   "1300 TYPE_SLICE_BEGIN", "1300 TYPE_SLICE_END",
      "1400 TYPE_SLICE_END",   "1900 TYPE_SLICE_END"};
  EXPECT_EQ(order, expected) << text;

  // The launch starts flow 1 and the kernel ends it; names are interned once and referred to.
  EXPECT_EQ(Count(text, " flow_ids: 1\n"), 1u);
  EXPECT_EQ(Count(text, " terminating_flow_ids: 1\n"), 1u);
  EXPECT_EQ(Count(text, "name: \"sm90_gemm\""), 1u);
  EXPECT_NE(text.find("string_value: \"4,2,1\""), std::string::npos);
  EXPECT_NE(text.find("int_value: 8192"), std::string::npos);
}

// A crafted worker whose kernels all overlap without nesting gets at most 8 lanes per stream, not
// one per kernel (which made the export quadratic), and still every event once. Host thread ids
// Perfetto cannot take (over 32 bits, or in the GPU streams' range) get ids of their own.
TEST(PerfettoExporterTest, OverlapLanesAreBoundedAndEveryThreadKeepsItsOwnId) {
  Capture capture;
  WorkerTrace& w = capture.workers.emplace_back();
  w.info.rank = 0;
  const NameId gemm = w.strings.Intern("gemm");
  const NameId call = w.strings.Intern("cudaLaunchKernel");
  constexpr int kKernels = 200;
  KernelTable& k = w.kernels;
  for (int i = 0; i < kKernels; ++i) {
    k.start.push_back(1'000 + i), k.end.push_back(1'000 + i + 10'000);
    k.device.push_back(0), k.stream.push_back(7), k.name.push_back(gemm);
    k.correlation.push_back(-1), k.grid_x.push_back(1), k.grid_y.push_back(1);
    k.grid_z.push_back(1), k.block_x.push_back(1), k.block_y.push_back(1), k.block_z.push_back(1);
    k.registers_per_thread.push_back(0), k.shared_memory_bytes.push_back(0);
    k.kernel_class.push_back(KernelClass::kCompute);
  }
  RuntimeCallTable& r = w.runtime_calls;
  for (int64_t thread : {int64_t{1}, int64_t{4'294'967'297}, StreamTrackId(0, 7)}) {
    r.start.push_back(10), r.end.push_back(20), r.thread.push_back(thread), r.name.push_back(call);
    r.correlation.push_back(-1), r.external_id.push_back(-1),
        r.api_kind.push_back(ApiKind::kRuntime);
  }
  ASSERT_TRUE(w.Validate().ok()) << w.Validate();
  ScratchDir dir;
  const CaptureView view(capture);
  absl::StatusOr<ExportStats> stats = ExportTo(view, dir.File("lanes.pb"));
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->events, kKernels + 3u);
  const std::string text = Decode(dir.File("lanes.pb"));
  EXPECT_EQ(Count(text, "type: TYPE_SLICE_BEGIN"), kKernels + 3u);
  EXPECT_EQ(Count(text, "(overlapping "), 7u) << "the stream and 7 lanes beside it";
  // Three host threads and the stream: four distinct thread ids.
  EXPECT_EQ(Count(text, "tid: 1\n"), 1u);
  EXPECT_EQ(Count(text, "tid: 536870912\n"), 1u);  // 2^29: the first id given out
  EXPECT_EQ(Count(text, "tid: 536870913\n"), 1u);
  EXPECT_EQ(Count(text, "tid: " + std::to_string(StreamTrackId(0, 7)) + "\n"), 1u);
}

TEST(PerfettoExporterTest, AnEmptyCaptureIsAnEmptyTrace) {
  Capture capture;
  const CaptureView view(capture);
  ScratchDir dir;
  absl::StatusOr<ExportStats> stats = ExportTo(view, dir.File("empty.pb"));
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bytes, 0u);
  EXPECT_EQ(Decode(dir.File("empty.pb")), "");
}

}  // namespace
}  // namespace podscope::common
