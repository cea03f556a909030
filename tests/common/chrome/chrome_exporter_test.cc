#include "common/chrome/chrome_exporter.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <climits>
#include <cmath>
#include <set>

#include "common/file_io.h"
#include "common/kineto/kineto_importer.h"
#include "common/trace_files.h"
#include "tests/common/sample_trace.h"
#include "tests/test_paths.h"

namespace podscope::common {
namespace {

using podscope::testing::KinetoFixture;
using podscope::testing::ScratchDir;

std::string ExportToString(const CaptureView& view, ExportOptions options = {}) {
  std::string json;
  absl::StatusOr<ExportStats> stats =
      WriteChromeTrace(view, options, [&json](std::string_view piece) {
        json.append(piece);
        return absl::OkStatus();
      });
  EXPECT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->bytes, json.size());
  return json;
}

Capture TraceFilterCapture() {
  absl::StatusOr<Capture> capture =
      LoadCapture(*ExpandTraceInputs({KinetoFixture("trace_filter")}));
  EXPECT_TRUE(capture.ok()) << capture.status();
  return capture.ok() ? *std::move(capture) : Capture{};
}

TEST(ChromeExporterTest, OutputIsValidTraceEventFormatWithNamedTracks) {
  const Capture capture = TraceFilterCapture();
  const std::string json = ExportToString(CaptureView(capture));
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(json).get(root), simdjson::SUCCESS);
  simdjson::dom::array events;
  ASSERT_EQ(root["traceEvents"].get_array().get(events), simdjson::SUCCESS);

  std::set<std::string> process_names, thread_names;
  std::set<int64_t> pids;
  size_t flows_start = 0, flows_end = 0;
  for (simdjson::dom::element e : events) {
    std::string_view ph = e["ph"].get_string().value();
    int64_t pid = e["pid"].get_int64().value();
    pids.insert(pid);
    if (ph == "M") {
      std::string_view name = e["name"].get_string().value();
      std::string_view value;
      if (e["args"]["name"].get_string().get(value) == simdjson::SUCCESS) {
        (name == "process_name" ? process_names : thread_names).insert(std::string(value));
      }
    } else if (ph == "X") {
      // Every complete event has a numeric ts and a non-negative dur.
      double dur = e["dur"].get_double().value();
      EXPECT_GE(dur, 0);
      EXPECT_EQ(e["ts"].is_number(), true);
    } else if (ph == "s") {
      ++flows_start;
    } else if (ph == "f") {
      ++flows_end;
      EXPECT_EQ(e["bp"].get_string().value(), "e");
    }
  }
  EXPECT_EQ(pids, (std::set<int64_t>{1, 2}));
  EXPECT_EQ(process_names, (std::set<std::string>{"rank 0 (pyper:trainer:0:0 pid 4037)",
                                                  "rank 1 (pyper:trainer:0:1 pid 4045)"}))
      << *process_names.begin();
  EXPECT_TRUE(thread_names.count("GPU 0 stream 7"));
  EXPECT_TRUE(thread_names.count("GPU 0 stream 84"));
  // One arrow per kernel/copy whose launch is in the trace: rank 0 has 1154 kernels and 50
  // copies, all launched by a runtime call in the file; rank 1 has 1104 + 50.
  EXPECT_EQ(flows_start, flows_end);
  EXPECT_EQ(flows_start, 1154u + 50u + 1104u + 50u);
}

TEST(ChromeExporterTest, ReimportGivesTheSameEvents) {
  const Capture capture = TraceFilterCapture();
  const std::string json = ExportToString(CaptureView(capture));
  std::string padded = json;
  padded.reserve(json.size() + kReadPadding);
  KinetoImporter importer;
  absl::StatusOr<ImportResult> again = importer.ImportJson("export.json", padded);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->workers.size(), capture.workers.size());
  for (size_t i = 0; i < capture.workers.size(); ++i) {
    const WorkerTrace& a = capture.workers[i];
    const WorkerTrace& b = again->workers[i];
    EXPECT_EQ(a.Counts(), b.Counts()) << i;
    EXPECT_EQ(b.info.rank, a.info.rank);
    EXPECT_EQ(b.info.world_size, a.info.world_size);
    EXPECT_EQ(b.info.process_name, a.info.process_name);
    // Identity clocks: every timestamp survives exactly.
    EXPECT_EQ(a.kernels.start, b.kernels.start);
    EXPECT_EQ(a.kernels.end, b.kernels.end);
    EXPECT_EQ(a.host_spans.start, b.host_spans.start);
    EXPECT_EQ(a.collectives.op, b.collectives.op);
    EXPECT_EQ(a.collectives.bytes, b.collectives.bytes);
    EXPECT_EQ(a.collectives.enqueue, b.collectives.enqueue);
    EXPECT_EQ(a.steps.number, b.steps.number);
    EXPECT_EQ(a.memcpys.kind, b.memcpys.kind);
    EXPECT_EQ(a.host_spans.category, b.host_spans.category);
  }
}

// A live capture's export starts at its window, whatever its earliest event says: one record
// with a wrong time (a GPU clock's zero, ~1,960 s after it) would otherwise make the trace span
// 56 years in a viewer.
TEST(ChromeExporterTest, ALiveCapturesTimeBaseIsItsWindow) {
  WorkerTrace w = podscope::testing::MakeSampleTrace();
  w.clock = ClockModel{};
  Capture capture;
  capture.workers.push_back(w);
  TimeNs first = INT64_MAX;
  for (TimeNs t : w.kernels.start) first = std::min(first, t);
  const TimeNs window_start = first + 5'432'100;
  const std::string json = ExportToString(CaptureView(capture), {.window_start_ns = window_start});
  const TimeNs base = (window_start - 1'000'000) - (window_start - 1'000'000) % 1'000'000;
  EXPECT_NE(json.find("\"base_time_ns\":" + std::to_string(base)), std::string::npos)
      << json.substr(0, 300);
  // The Kineto layout keeps absolute times whatever the window: no base at all.
  ExportOptions kineto{.layout = ExportLayout::kKineto, .window_start_ns = window_start};
  const std::string absolute = ExportToString(CaptureView(capture), kineto);
  EXPECT_EQ(absolute.find("base_time_ns"), std::string::npos);
  EXPECT_NE(absolute.find(std::to_string(first / 1000)), std::string::npos)
      << "the first kernel at its epoch microsecond";
  capture.workers[0].kernels.start[0] = 1'959'607'000'000;  // a record with no true time
  EXPECT_NE(ExportToString(CaptureView(capture), {.window_start_ns = window_start})
                .find("\"base_time_ns\":" + std::to_string(base)),
            std::string::npos);
}

// A merged export keeps nanoseconds in a viewer too. Viewers read `ts` as a double:
// at epoch microseconds that is ~250 ns; relative to the capture's base (a whole millisecond,
// written in the podscope block and added back on import) it is exact.
TEST(ChromeExporterTest, TimestampsKeepNanosecondsInAViewer) {
  WorkerTrace w = podscope::testing::MakeSampleTrace();  // epoch times, 123 ns past a microsecond
  w.host_samples = {};
  w.clock = ClockModel{};  // identity: the times come back as they are
  Capture capture;
  capture.workers.push_back(w);
  const std::string json = ExportToString(CaptureView(capture));
  TimeNs first = INT64_MAX;
  for (TimeNs t : w.kernels.start) first = std::min(first, t);
  for (TimeNs t : w.host_spans.start) first = std::min(first, t);
  for (TimeNs t : w.runtime_calls.start) first = std::min(first, t);
  for (TimeNs t : w.memcpys.start) first = std::min(first, t);
  for (TimeNs t : w.collectives.enqueue) first = std::min(first, t);
  for (TimeNs t : w.steps.start) first = std::min(first, t);
  const TimeNs base = first - first % 1'000'000;
  EXPECT_NE(json.find("\"base_time_ns\":" + std::to_string(base)), std::string::npos)
      << json.substr(0, 300);
  // Every ts, read as a double the way a viewer reads it, is exact to the nanosecond.
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS);
  size_t checked = 0;
  for (simdjson::dom::element e : doc["traceEvents"].get_array()) {
    double ts = 0;
    if (e["ts"].get_double().get(ts) != simdjson::SUCCESS) continue;
    const double ns = ts * 1000;
    EXPECT_EQ(static_cast<double>(std::llround(ns)), ns) << ts;
    EXPECT_LT(ts, 1e9) << "relative to the base";
    ++checked;
  }
  EXPECT_GT(checked, 5u);
  std::string padded = json;
  padded.reserve(json.size() + kReadPadding);
  KinetoImporter importer;
  absl::StatusOr<ImportResult> again = importer.ImportJson("export.json", padded);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->workers.at(0).kernels.start, w.kernels.start);
  EXPECT_EQ(again->workers.at(0).host_spans.start, w.host_spans.start);
}

TEST(ChromeExporterTest, AppliesEachWorkersClockModel) {
  WorkerTrace w = podscope::testing::MakeSampleTrace();
  w.host_samples = {};  // not exported yet
  w.clock = ClockModel{.offset_ns = 5'000, .drift_ppb = 0, .reference_ns = 0};
  Capture capture;
  capture.workers.push_back(w);
  const std::string json = ExportToString(CaptureView(capture));
  std::string padded = json;
  padded.reserve(json.size() + kReadPadding);
  KinetoImporter importer;
  absl::StatusOr<ImportResult> again = importer.ImportJson("export.json", padded);
  ASSERT_TRUE(again.ok()) << again.status();
  const WorkerTrace& b = again->workers.at(0);
  ASSERT_EQ(b.kernels.size(), w.kernels.size());
  for (size_t i = 0; i < w.kernels.size(); ++i) {
    EXPECT_EQ(b.kernels.start[i], w.kernels.start[i] + 5'000);
    EXPECT_EQ(b.kernels.end[i] - b.kernels.start[i], w.kernels.end[i] - w.kernels.start[i]);
  }
  // Collective metadata written into the kernel's args comes back as the same row.
  ASSERT_EQ(b.collectives.size(), 1u);
  EXPECT_EQ(b.strings.Get(b.collectives.communicator[0]), "pg:0");
  EXPECT_EQ(b.collectives.sequence[0], 12);
  EXPECT_EQ(b.collectives.bytes[0], 4000);
  EXPECT_EQ(b.collectives.nranks[0], 4);
  EXPECT_EQ(b.collectives.channels[0], 16);
  EXPECT_EQ(b.strings.Get(b.collectives.algorithm[0]), "RING");
  EXPECT_EQ(b.info.host, "node-1");
}

TEST(ChromeExporterTest, GzipFileExportReadsBack) {
  const Capture capture = TraceFilterCapture();
  ScratchDir dir;
  const std::string path = dir.File("merged.json.gz");
  absl::StatusOr<ExportStats> stats = ExportChromeTraceFile(CaptureView(capture), path);
  ASSERT_TRUE(stats.ok()) << stats.status();
  absl::StatusOr<std::string> raw = ReadFileMaybeGzip(path);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->size(), stats->bytes);
  KinetoImporter importer;
  absl::StatusOr<ImportResult> again = importer.ImportFile(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->workers.size(), 2u);
}

TEST(ChromeExporterTest, SinkErrorsStopTheExport) {
  const Capture capture = TraceFilterCapture();
  absl::StatusOr<ExportStats> stats =
      WriteChromeTrace(CaptureView(capture), {},
                       [](std::string_view) { return absl::UnavailableError("disk full"); });
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kUnavailable);
}

TEST(ChromeExporterTest, ExportedEventsOfUndeclaredPidsAreRejectedOnImport) {
  const std::string json = R"({"podscope": {"format": 1, "workers": [{"pid": 1, "rank": 0}]},
    "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 2, "tid": 1, "ts": 1, "dur": 1}]})";
  KinetoImporter importer;
  absl::StatusOr<ImportResult> r = importer.ImportJson("x.json", json);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pid 2 is not one of the workers"), std::string::npos);
}

}  // namespace
}  // namespace podscope::common
