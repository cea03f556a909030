// The importer on small hand-written traces: every event kind, exact nanoseconds, collective
// linking, and every error path.
#include "common/kineto/kineto_importer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <regex>

#include "common/chrome/chrome_exporter.h"
#include "common/file_io.h"
#include "common/parse_number.h"
#include "common/str_util.h"
#include "tests/test_paths.h"

namespace podscope::common {
namespace {

constexpr char kTrace[] = R"json({
  "schemaVersion": 1,
  "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 4,
    "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "ranks": [4, 5, 1, 7], "group_size": 4}]},
  "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85899345920,
                        "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
  "traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 77, "tid": 0, "args": {"name": "trainer"}},
    {"ph": "M", "name": "thread_name", "pid": 77, "tid": 11, "args": {"name": "thread 11 (python) "}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 77, "tid": 11, "ts": 1000.5, "dur": 100.25, "args": {"External id": 1}},
    {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 77, "tid": 11, "ts": 1010, "dur": 20,
     "args": {"External id": 2, "Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1024,
              "Out msg nelems": 1024, "Group size": 4, "Process Group Name": "0",
              "Process Group Description": "default_pg", "Process Group Ranks": "[4, 5, 1, 7]", "Seq": 7}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 77, "tid": 11, "ts": 1015, "dur": 3,
     "args": {"External id": 2, "cbid": 211, "correlation": 55}},
    {"ph": "s", "id": 55, "pid": 77, "tid": 11, "ts": 1015, "cat": "ac2g", "name": "ac2g"},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "pid": 0, "tid": 13, "ts": 1030, "dur": 40.001,
     "args": {"External id": 2, "device": 0, "stream": 13, "correlation": 55, "registers per thread": 96,
              "shared memory": 41760, "grid": [8, 1, 1], "block": [640, 1, 1]}},
    {"ph": "f", "id": 55, "pid": 0, "tid": 13, "ts": 1030, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1020, "dur": 5,
     "args": {"device": 0, "stream": 7, "correlation": 56, "grid": [132, 2, 1], "block": [128, 1, 1]}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7, "ts": 1080, "dur": 2,
     "args": {"device": 0, "stream": 7, "correlation": 57, "bytes": 64}},
    {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 1085, "dur": 1,
     "args": {"device": 0, "stream": 7, "correlation": 58, "bytes": 8}},
    {"ph": "X", "cat": "cpu_op", "name": "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "pid": 77, "tid": 11, "ts": 1001, "dur": 4},
    {"ph": "X", "cat": "cpu_op", "name": "Optimizer.step#SGD.step", "pid": 77, "tid": 11, "ts": 1090, "dur": 5},
    {"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 77, "tid": 11, "ts": 1000.6, "dur": 99},
    {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 77, "tid": 11, "ts": 1019, "dur": 1, "args": {"correlation": 56}},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "fwd", "pid": 0, "tid": 7, "ts": 1020, "dur": 10, "args": {"stream": 7}},
    {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 900, "dur": 500},
    {"ph": "i", "name": "Iteration Start", "pid": "Traces", "tid": "x", "ts": 900, "s": "g"},
    {"ph": "X", "cat": "overhead", "name": "Buffer flush", "pid": 77, "tid": 11, "ts": 1200, "dur": 1}
  ]
})json";

size_t OffsetIn(const absl::Status& status);

ImportResult MustImport(const std::string& json, ImportOptions options = {}) {
  KinetoImporter importer(options);
  absl::StatusOr<ImportResult> result = importer.ImportJson("test.json", json);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : ImportResult{};
}

absl::Status ImportError(const std::string& json, ImportOptions options = {}) {
  KinetoImporter importer(options);
  absl::StatusOr<ImportResult> result = importer.ImportJson("bad.json", json);
  EXPECT_FALSE(result.ok()) << "imported: " << json.substr(0, 80);
  return result.status();
}

TEST(KinetoImporterTest, MapsEveryEventKindWithExactNanoseconds) {
  ImportResult r = MustImport(kTrace);
  ASSERT_EQ(r.workers.size(), 1u);
  const WorkerTrace& w = r.workers[0];
  EXPECT_EQ(w.Counts(), (EventCounts{.kernels = 2,
                                     .memcpys = 2,
                                     .runtime_calls = 2,
                                     .host_spans = 6,
                                     .collectives = 1,
                                     .steps = 1}));
  EXPECT_EQ(r.stats.profiler_spans, 1u);
  EXPECT_EQ(r.stats.flows, 2u);
  EXPECT_EQ(r.stats.metadata, 2u);
  EXPECT_EQ(r.stats.skipped, 2u);  // the instant event and the "overhead" span

  // Kernels are sorted by start: gemm (1020) before the NCCL kernel (1030).
  EXPECT_EQ(w.strings.Get(w.kernels.name[0]), "gemm");
  EXPECT_EQ(w.kernels.kernel_class[0], KernelClass::kCompute);
  EXPECT_EQ(w.kernels.kernel_class[1], KernelClass::kCommunication);
  EXPECT_EQ(w.kernels.start[1], 1'030'000);
  EXPECT_EQ(w.kernels.end[1], 1'070'001);  // 40.001 us keeps its last nanosecond
  EXPECT_EQ(w.kernels.stream[1], 13);
  EXPECT_EQ(w.kernels.grid_x[0], 132u);
  EXPECT_EQ(w.kernels.grid_y[0], 2u);
  EXPECT_EQ(w.kernels.registers_per_thread[1], 96);
  EXPECT_EQ(w.kernels.shared_memory_bytes[1], 41760);

  EXPECT_EQ(w.memcpys.kind[0], MemcpyKind::kDeviceToHost);
  EXPECT_EQ(w.memcpys.bytes[0], 64);
  EXPECT_EQ(w.memcpys.kind[1], MemcpyKind::kMemset);

  EXPECT_EQ(w.runtime_calls.api_kind[0], ApiKind::kRuntime);
  EXPECT_EQ(w.runtime_calls.external_id[0], 2);
  EXPECT_EQ(w.runtime_calls.api_kind[1], ApiKind::kDriver);

  // Host spans by start: step (1000.5), python (1000.6), dataloader (1001), comms op (1010),
  // gpu annotation (1020), optimizer (1090)... check categories by name.
  std::map<std::string, HostSpanCategory> category;
  for (size_t i = 0; i < w.host_spans.size(); ++i) {
    category[std::string(w.strings.Get(w.host_spans.name[i]))] = w.host_spans.category[i];
  }
  EXPECT_EQ(category["ProfilerStep#3"], HostSpanCategory::kAnnotation);
  EXPECT_EQ(category["record_param_comms"], HostSpanCategory::kOp);
  EXPECT_EQ(category["enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"],
            HostSpanCategory::kInput);
  EXPECT_EQ(category["Optimizer.step#SGD.step"], HostSpanCategory::kOptimizer);
  EXPECT_EQ(category["train.py(12): step"], HostSpanCategory::kPython);
  EXPECT_EQ(category["fwd"], HostSpanCategory::kGpuAnnotation);
  EXPECT_EQ(w.host_spans.start[0], 1'000'500);
  EXPECT_EQ(w.host_spans.step[0], 3);

  EXPECT_EQ(w.steps.number, std::vector<int64_t>{3});
  EXPECT_EQ(w.steps.start, std::vector<TimeNs>{1'000'500});
  EXPECT_EQ(w.steps.end, std::vector<TimeNs>{1'100'750});
}

TEST(KinetoImporterTest, LinksCollectiveToItsLaunchAndOp) {
  ImportResult r = MustImport(kTrace);
  const WorkerTrace& w = r.workers.at(0);
  const CollectiveTable& c = w.collectives;
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c.op[0], CollectiveOp::kAllReduce);
  EXPECT_EQ(w.strings.Get(c.communicator[0]), "pg:0");
  EXPECT_EQ(c.rank[0], 2);  // rank 1 is third in the group's ranks [4, 5, 1, 7]
  EXPECT_EQ(c.nranks[0], 4);
  EXPECT_EQ(c.sequence[0], 7);
  EXPECT_EQ(c.count[0], 1024);
  EXPECT_EQ(w.strings.Get(c.dtype[0]), "Float");
  EXPECT_EQ(c.bytes[0], 4096);
  EXPECT_EQ(w.strings.Get(c.algorithm[0]), "RING");
  EXPECT_EQ(w.strings.Get(c.protocol[0]), "LL");
  EXPECT_EQ(c.channels[0], 8);
  EXPECT_EQ(c.enqueue[0], 1'015'000);
  EXPECT_EQ(c.kernel_start[0], 1'030'000);
  EXPECT_EQ(c.kernel_end[0], 1'070'001);
  EXPECT_EQ(c.correlation[0], 55);
}

// A file several batches long (the importer parses 4 MB of events at a time): a collective
// whose op is in the first batch and whose kernel is in the last is linked with the op's group
// and type, which the importer had to keep after the op's batch was gone; every event between
// arrives with its exact time. The same bytes read from a gzip file a block at a time agree.
TEST(KinetoImporterTest, ACollectiveIsLinkedAcrossBatchesOfALargeFile) {
  constexpr int kFiller = 55'000;
  std::string json = R"({"distributedInfo": {"rank": 1, "world_size": 2}, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 77, "tid": 11, "ts": 10, "dur": 20,
     "args": {"External id": 2, "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 8,
              "Out msg nelems": 8, "Group size": 2, "Process Group Name": "tp-group-of-a-long-name",
              "Process Group Ranks": "[0, 1]", "Seq": 3}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 77, "tid": 11, "ts": 15, "dur": 3,
     "args": {"External id": 2, "correlation": 55}})";
  for (int i = 0; i < kFiller; ++i) {
    json += StrCat(
        R"(,
    {"ph": "X", "cat": "kernel", "name": "gemm_)",
        i % 7, R"(", "pid": 0, "tid": 7, "ts": )", 100 + i, R"(.5, "dur": 0.25,
     "args": {"device": 0, "stream": 7, "correlation": )",
        1000 + i,
        R"(, "grid": [132, 2, 1], "block": [128, 1, 1], "note": "padding, [brackets] {and} \"quotes\""}})");
  }
  json += R"json(,
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "pid": 0, "tid": 13, "ts": 90000, "dur": 4,
     "args": {"External id": 2, "device": 0, "stream": 13, "correlation": 55, "grid": [2, 1, 1], "block": [640, 1, 1]}}
  ]})json";
  ASSERT_GT(json.size(), size_t{3} * (4 << 20));

  podscope::testing::ScratchDir dir;
  const std::string gz = dir.File("large.json.gz");
  absl::StatusOr<std::string> packed = GzipCompress(json);
  ASSERT_TRUE(packed.ok());
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(gz.c_str(), "wb"), &std::fclose);
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(packed->data(), 1, packed->size(), f.get()), packed->size());
  }
  KinetoImporter importer;
  absl::StatusOr<ImportResult> from_text = importer.ImportJson("large.json", json);
  absl::StatusOr<ImportResult> from_file = importer.ImportFile(gz);
  for (const absl::StatusOr<ImportResult>* r : {&from_text, &from_file}) {
    ASSERT_TRUE(r->ok()) << r->status();
    EXPECT_EQ((*r)->json_bytes, json.size());
    const WorkerTrace& w = (*r)->workers.at(0);
    ASSERT_EQ(w.collectives.size(), 1u);
    EXPECT_EQ(w.strings.Get(w.collectives.communicator[0]), "pg:tp-group-of-a-long-name");
    EXPECT_EQ(w.strings.Get(w.collectives.dtype[0]), "BFloat16");
    EXPECT_EQ(w.collectives.rank[0], 1);
    EXPECT_EQ(w.collectives.sequence[0], 3);
    EXPECT_EQ(w.collectives.enqueue[0], 15'000);
    EXPECT_EQ(w.collectives.kernel_start[0], 90'000'000);
    ASSERT_EQ(w.kernels.size(), size_t{kFiller} + 1);
    for (int i = 0; i < kFiller; ++i) {
      ASSERT_EQ(w.kernels.start[i], (100 + i) * 1000 + 500) << i;
      ASSERT_EQ(w.kernels.end[i], (100 + i) * 1000 + 750) << i;
      ASSERT_EQ(w.strings.Get(w.kernels.name[i]), StrCat("gemm_", i % 7)) << i;
    }
  }
  // An error deep in the file names the event and its offset in the whole file.
  const size_t bad = json.find("\"ts\": 30100.5");
  ASSERT_NE(bad, std::string::npos);
  std::string broken = json;
  broken.replace(bad, 13, "\"ts\": \"late\"");
  absl::StatusOr<ImportResult> failed = importer.ImportJson("large.json", broken);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("traceEvents[30002]: ts: expected a number"),
            std::string::npos)
      << failed.status();
  EXPECT_GE(OffsetIn(failed.status()), bad - 120);
  EXPECT_LE(OffsetIn(failed.status()), bad + 13);
}

TEST(KinetoImporterTest, ReadsWorkerMetadata) {
  ImportResult r = MustImport(kTrace);
  const WorkerInfo& info = r.workers.at(0).info;
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.backend, "nccl");
  EXPECT_EQ(info.pid, 77);
  EXPECT_EQ(info.process_name, "trainer");
  EXPECT_EQ(info.source, "test.json");
  ASSERT_EQ(info.devices.size(), 1u);
  EXPECT_EQ(info.devices[0].name, "NVIDIA H100");
  EXPECT_EQ(info.devices[0].sm_count, 132);
  ASSERT_EQ(info.process_groups.size(), 1u);
  EXPECT_EQ(info.process_groups[0].description, "default_pg");
  EXPECT_EQ(info.process_groups[0].ranks, (std::vector<int32_t>{4, 5, 1, 7}));
  ASSERT_EQ(info.tracks.size(), 1u);
  EXPECT_EQ(info.tracks[0].name, "thread 11 (python)");
}

// The allocator's `[memory]` instants (PyTorch's profile_memory=True): CUDA and CPU events are
// kept with their totals; other device types, and events without a size, are skipped.
TEST(KinetoImporterTest, MemoryInstantsBecomeMemoryEvents) {
  const std::string json = R"json({"traceEvents": [
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 5, "tid": 9, "ts": 100,
     "args": {"Device Type": 1, "Device Id": 3, "Addr": 140000, "Bytes": 2097152, "Total Allocated": 6291456,
              "Total Reserved": 20971520, "Stream": -1}},
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 5, "tid": 9, "ts": 101.5,
     "args": {"Device Type": 0, "Device Id": -1, "Addr": 1, "Bytes": -512}},
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 5, "tid": 9, "ts": 102,
     "args": {"Device Type": 2, "Device Id": 0, "Bytes": 64}},
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 5, "tid": 9, "ts": 103,
     "args": {"Device Type": 1, "Device Id": 0}},
    {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "Iteration Start: PyTorch Profiler", "pid": 5, "tid": 9, "ts": 1}
  ]})json";
  ImportResult r = MustImport(json);
  const MemoryEventTable& m = r.workers.at(0).memory_events;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.time, (std::vector<TimeNs>{100'000, 101'500}));
  EXPECT_EQ(m.device, (std::vector<int32_t>{3, -1}));
  EXPECT_EQ(m.bytes, (std::vector<int64_t>{2097152, -512}));
  EXPECT_EQ(m.total_allocated, (std::vector<int64_t>{6291456, kUnknownBytes}));
  EXPECT_EQ(m.total_reserved, (std::vector<int64_t>{20971520, kUnknownBytes}));
  EXPECT_EQ(m.thread, (std::vector<int64_t>{9, 9}));
  EXPECT_EQ(r.stats.memory_events, 2u);
  EXPECT_EQ(r.stats.skipped, 3u);  // the other device type, the sizeless one, the iteration mark

  // Exported as Kineto writes them, they import as they were.
  std::string exported;
  ExportOptions options;
  options.layout = ExportLayout::kKineto;
  const WorkerTrace& w = r.workers.at(0);
  ASSERT_TRUE(WriteChromeTrace(CaptureView(std::vector<const WorkerTrace*>{&w}), options,
                               [&](std::string_view piece) {
                                 exported.append(piece);
                                 return absl::OkStatus();
                               })
                  .ok());
  const ImportResult reimported = MustImport(exported);
  const MemoryEventTable& again = reimported.workers.at(0).memory_events;
  EXPECT_EQ(again.time, m.time);
  EXPECT_EQ(again.device, m.device);
  EXPECT_EQ(again.bytes, m.bytes);
  EXPECT_EQ(again.total_allocated, m.total_allocated);
  EXPECT_EQ(again.total_reserved, m.total_reserved);
  EXPECT_EQ(again.thread, m.thread);
}

// Sizes past a petabyte are not sizes: such an event is skipped, so sums downstream cannot wrap.
TEST(KinetoImporterTest, MemoryEventsWithAbsurdSizesAreSkipped) {
  const std::string json = R"json({"traceEvents": [
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 5, "tid": 9, "ts": 100,
     "args": {"Device Type": 1, "Device Id": 0, "Bytes": 9000000000000000000}},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 5, "tid": 9, "ts": 101,
     "args": {"Device Type": 1, "Device Id": 0, "Bytes": 1, "Total Allocated": -9000000000000000000}},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 5, "tid": 9, "ts": 102,
     "args": {"Device Type": 1, "Device Id": 0, "Bytes": 1024, "Total Allocated": 4096}}
  ]})json";
  ImportResult r = MustImport(json);
  EXPECT_EQ(r.workers.at(0).memory_events.size(), 1u);
  EXPECT_EQ(r.stats.skipped, 2u);
}

TEST(KinetoImporterTest, OlderSchemaTakesShapeAndTypeFromTheEnclosingAnnotation) {
  const std::string json = R"json({"distributedInfo": {"rank": 0, "world_size": 8}, "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 5, "tid": 9, "ts": 100, "dur": 50,
     "args": {"Input Dims": [[19618307]], "Input type": ["float"]}},
    {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 5, "tid": 9, "ts": 101, "dur": 40,
     "args": {"Input Dims": [[], [], []], "Input type": ["TensorList", "Scalar", ""]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 9, "ts": 110, "dur": 5, "args": {"correlation": 3}},
    {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     "pid": 0, "tid": 24, "ts": 120, "dur": 900, "args": {"device": 0, "stream": 24, "correlation": 3, "grid": [2, 1, 1]}}
  ]})json";
  ImportResult r = MustImport(json);
  const WorkerTrace& w = r.workers.at(0);
  ASSERT_EQ(w.collectives.size(), 1u);
  EXPECT_EQ(w.collectives.op[0], CollectiveOp::kAllReduce);
  EXPECT_EQ(w.collectives.count[0], 19618307);
  EXPECT_EQ(w.collectives.bytes[0], 4 * 19618307);
  EXPECT_EQ(w.strings.Get(w.collectives.communicator[0]), "stream:24");
  EXPECT_EQ(w.collectives.sequence[0], kUnknownSequence);
  EXPECT_EQ(w.collectives.nranks[0], 8);
  EXPECT_EQ(w.collectives.rank[0], 0);
  EXPECT_EQ(w.collectives.channels[0], 2);
}

// Each op's "Input type" is its own: the first tensor's type, whichever key comes first, and
// nothing carried over from the op before.
TEST(KinetoImporterTest, EachCommOpTakesTheTypeOfItsOwnFirstTensor) {
  const std::string json = R"json({"distributedInfo": {"rank": 0, "world_size": 8}, "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 5, "tid": 9, "ts": 100, "dur": 50,
     "args": {"Input Dims": [[100]], "Input type": ["double"]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 9, "ts": 110, "dur": 5, "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_double(x)", "pid": 0, "tid": 24, "ts": 120, "dur": 90, "args": {"device": 0, "stream": 24, "correlation": 1}},
    {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 5, "tid": 9, "ts": 300, "dur": 50,
     "args": {"Input type": ["Scalar", "c10::BFloat16"], "Input Dims": [[], [64]]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 9, "ts": 310, "dur": 5, "args": {"correlation": 2}},
    {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_bf16(x)", "pid": 0, "tid": 24, "ts": 320, "dur": 90, "args": {"device": 0, "stream": 24, "correlation": 2}},
    {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 5, "tid": 9, "ts": 500, "dur": 50,
     "args": {"Input Dims": [[], [10]]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 9, "ts": 510, "dur": 5, "args": {"correlation": 3}},
    {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(x)", "pid": 0, "tid": 24, "ts": 520, "dur": 90, "args": {"device": 0, "stream": 24, "correlation": 3}}
  ]})json";
  ImportResult r = MustImport(json);
  const WorkerTrace& w = r.workers.at(0);
  ASSERT_EQ(w.collectives.size(), 3u);
  EXPECT_EQ(w.collectives.count[0], 100);
  EXPECT_EQ(w.collectives.bytes[0], 8 * 100);  // double
  EXPECT_EQ(w.collectives.count[1], 64);
  EXPECT_EQ(w.collectives.bytes[1], 2 * 64);  // the second input's bf16, the first is a scalar
  EXPECT_EQ(w.collectives.count[2], 10);
  EXPECT_EQ(w.collectives.bytes[2], 0) << "no type of its own: unknown, not the previous op's bf16";
}

TEST(KinetoImporterTest, CommsIdIdentifiesTheCommunicatorWithoutAProcessGroupName) {
  const std::string json = R"json({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(x)", "pid": 0, "tid": 9, "ts": 5, "dur": 1,
     "args": {"device": 0, "stream": 9, "correlation": 1, "Comms Id": 1311768467463790320,
              "Collective name": "_allgather_base", "In msg nelems": 8, "Out msg nelems": 64, "dtype": "BFloat16"}}]})json";
  ImportResult r = MustImport(json);
  const WorkerTrace& w = r.workers.at(0);
  ASSERT_EQ(w.collectives.size(), 1u);
  EXPECT_EQ(w.strings.Get(w.collectives.communicator[0]), "comm:1311768467463790320");
  EXPECT_EQ(w.collectives.op[0], CollectiveOp::kAllGather);
  // AllGather moves the output size: 64 elements of 2 bytes.
  EXPECT_EQ(w.collectives.bytes[0], 128);
  EXPECT_EQ(w.collectives.enqueue[0], 5'000);  // no launch in the trace: the kernel start
}

TEST(KinetoImporterTest, EscapedStringsAreUnescaped) {
  const std::string json = R"json({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "say \"hi\" \u00b5s\ttab\\", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "plain name", "pid": 1, "tid": 1, "ts": 2, "dur": 1}]})json";
  ImportResult r = MustImport(json);
  const WorkerTrace& w = r.workers.at(0);
  ASSERT_EQ(w.host_spans.size(), 2u);
  EXPECT_EQ(w.strings.Get(w.host_spans.name[0]), "say \"hi\" \u00b5s\ttab\\");
  EXPECT_EQ(w.strings.Get(w.host_spans.name[1]), "plain name");
}

// Pulls "byte offset N" out of an error message.
size_t OffsetIn(const absl::Status& status) {
  std::smatch m;
  const std::string message(status.message());
  EXPECT_TRUE(std::regex_search(message, m, std::regex("byte offset ([0-9]+)"))) << message;
  return m.empty() ? 0 : static_cast<size_t>(common::ParseInt(m[1].str()).value());
}

TEST(KinetoImporterTest, TruncatedJsonIsRejected) {
  const std::string full = kTrace;
  for (size_t cut : {full.size() - 3, full.size() / 2, size_t{40}, size_t{1}}) {
    absl::Status status = ImportError(full.substr(0, cut));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("bad.json: byte offset"), std::string::npos) << status;
  }
}

TEST(KinetoImporterTest, WrongTypesNameTheEventFieldAndOffset) {
  const std::string json =
      R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1},)"
      R"( {"ph": "X", "cat": "kernel", "name": "k", "ts": "abc", "dur": 1}]})";
  absl::Status status = ImportError(json);
  EXPECT_NE(status.message().find("traceEvents[1]: ts: expected a number"), std::string::npos)
      << status;
  const size_t second_event = json.find("{\"ph\"", 20);
  EXPECT_GE(OffsetIn(status), second_event);
  EXPECT_LE(OffsetIn(status), json.find("\"abc\"") + 5);

  EXPECT_NE(ImportError(R"({"traceEvents": [{"ph": "X", "name": 5, "ts": 1, "dur": 1}]})")
                .message()
                .find("name: expected a string"),
            std::string::npos);
  EXPECT_NE(
      ImportError(R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "args": {"stream": "x"}}]})")
          .message()
          .find("stream: expected a number"),
      std::string::npos);
  EXPECT_NE(ImportError(R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "args": []}]})")
                .message()
                .find("args: expected an object"),
            std::string::npos);
  EXPECT_NE(ImportError(R"({"traceEvents": [3]})").message().find("event must be an object"),
            std::string::npos);
  EXPECT_NE(ImportError(R"({"traceEvents": {}})").message().find("traceEvents must be an array"),
            std::string::npos);
}

TEST(KinetoImporterTest, StructuralErrors) {
  EXPECT_NE(ImportError(R"({"schemaVersion": 1})").message().find("no traceEvents array"),
            std::string::npos);
  EXPECT_NE(ImportError("[]").message().find("top level must be a JSON object"), std::string::npos);
  EXPECT_NE(ImportError("").message().find("bad.json"), std::string::npos);
  EXPECT_NE(ImportError(R"({"traceEvents": [{"ph": "X", "ts": 1}]})").message().find("no dur"),
            std::string::npos);
  EXPECT_NE(ImportError(R"({"traceEvents": [{"ph": "X", "dur": 1}]})").message().find("no ts"),
            std::string::npos);
  EXPECT_NE(ImportError(R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": -4}]})")
                .message()
                .find("negative dur"),
            std::string::npos);
  EXPECT_NE(ImportError(R"({"traceEvents": [{"ts": 1, "dur": 4}]})").message().find("no ph"),
            std::string::npos);
  EXPECT_NE(ImportError(R"({"traceEvents": []} trailing)").message().find("bad.json"),
            std::string::npos);
}

// Every top-level member is valid JSON or the file is refused, read or not; and what simdjson
// finds before it reads a batch of events (bytes that are not UTF-8) is not blamed on the last
// event read.
TEST(KinetoImporterTest, InvalidJsonAnywhereIsRefusedAndBlamedOnNoWrongEvent) {
  for (const char* member : {R"(1"x)", R"([1})", R"("\q")", "nope", "\"\xff\xfe\""}) {
    const absl::Status s =
        ImportError(StrCat(R"({"schemaVersion": )", member, R"(, "traceEvents": []})"));
    EXPECT_NE(s.message().find("not valid JSON"), std::string::npos) << member << ": " << s;
    EXPECT_GE(OffsetIn(s), 18u) << s;
    EXPECT_LE(OffsetIn(s), 18u + std::string_view(member).size()) << s;
  }
  std::string events;
  for (int i = 0; i < 3; ++i)
    events += StrCat(i ? "," : "", R"({"ph": "X", "cat": "kernel", "name": "k", "ts": )", i,
                     R"(, "dur": 1})");
  // A raw control character in a string: simdjson's first pass over the batch finds it.
  const std::string bad =
      R"({"traceEvents": [)" + events + ", {\"ph\": \"X\", \"name\": \"\x01\"}]}";
  const absl::Status s = ImportError(bad);
  EXPECT_NE(s.message().find("bad.json: byte offset 17: not valid JSON somewhere before byte "
                             "offset " +
                             std::to_string(bad.size() - 1)),
            std::string::npos)
      << s;
  EXPECT_EQ(s.message().find("traceEvents["), std::string::npos) << s;
}

TEST(KinetoImporterTest, LimitsAreEnforced) {
  ImportOptions few;
  few.max_events = 3;
  absl::Status too_many = ImportError(kTrace, few);
  EXPECT_EQ(too_many.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_many.message().find("more than 3 events"), std::string::npos);

  ImportOptions short_strings;
  short_strings.max_string_bytes = 16;
  absl::Status too_long = ImportError(kTrace, short_strings);
  EXPECT_NE(too_long.message().find("exceeds the limit of 16"), std::string::npos) << too_long;
}

TEST(KinetoImporterTest, DeepNestingInUnmodelledValuesIsSkippedSafely) {
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  const std::string json =
      R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"blob": )" +
      deep + "}}]}";
  KinetoImporter importer;
  absl::StatusOr<ImportResult> result = importer.ImportJson("deep.json", json);
  // Either imported (the blob is skipped) or refused with a clear error; never a crash.
  if (result.ok()) {
    EXPECT_EQ(result->workers.at(0).host_spans.size(), 1u);
  } else {
    EXPECT_NE(result.status().message().find("deep.json"), std::string::npos);
  }
}

TEST(KinetoImporterTest, ImporterIsReusableAfterAnError) {
  KinetoImporter importer;
  EXPECT_FALSE(importer.ImportJson("bad.json", "{\"traceEvents\": [").ok());
  absl::StatusOr<ImportResult> good = importer.ImportJson("good.json", kTrace);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->workers.at(0).kernels.size(), 2u);
}

TEST(KinetoImporterTest, GzipThatIsNotGzipIsAClearFileError) {
  podscope::testing::ScratchDir dir;
  const std::string path = dir.Write("rank-3.json.gz", kTrace);
  KinetoImporter importer;
  absl::StatusOr<ImportResult> result = importer.ImportFile(path);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("rank-3.json.gz: named .gz but is not gzip data"),
            std::string::npos)
      << result.status();
  const std::string garbage =
      dir.Write("rank-4.json.gz", std::string("\x1f\x8b\x08\x00garbage", 11));
  absl::StatusOr<ImportResult> bad = importer.ImportFile(garbage);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rank-4.json.gz"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace podscope::common
