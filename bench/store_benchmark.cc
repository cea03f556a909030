// Trace store write and read throughput (events/s) and bytes on disk per event: a simulated
// 32-rank capture at the default preset (~1 M events), and 8 ranks at the dense one, a real rank's
// density (~1.2 M events). Each worker is written in chunks of 65,536 events, as an agent sends.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>

#include "common/trace_slice.h"
#include "sim/workload_model.h"
#include "storage/rocksdb_trace_store.h"

namespace podscope::bench {
namespace {

// Arg 0: the default preset; 1: the dense one.
const common::Capture& Job(int64_t dense) {
  static const sim::Workload jobs[2] = {[] {
                                          sim::WorkloadOptions o;
                                          o.ranks = 32;
                                          o.steps = 50;
                                          return sim::SimulateJob(o);
                                        }(),
                                        [] {
                                          sim::WorkloadOptions o;
                                          (void)sim::ApplyPreset("dense", &o);
                                          o.ranks = 8;
                                          o.steps = 100;
                                          return sim::SimulateJob(o);
                                        }()};
  return jobs[dense != 0].capture;
}

uint64_t JobEvents(int64_t dense) {
  uint64_t n = 0;
  for (const common::WorkerTrace& w : Job(dense).workers) n += w.Counts().Total();
  return n;
}

void WriteJob(storage::RocksDbTraceStore& store, int64_t dense, benchmark::State& state) {
  const auto& workers = Job(dense).workers;
  for (uint32_t w = 0; w < workers.size(); ++w) {
    uint64_t sequence = 0;
    for (const common::WorkerTrace& chunk : common::SplitIntoChunks(workers[w], 65'536)) {
      if (!store.PutChunk("bench", w, sequence++, chunk).ok()) state.SkipWithError("put failed");
    }
  }
  storage::CaptureRecord record;
  record.id = "bench";
  record.state = storage::CaptureState::kComplete;
  for (uint32_t w = 0; w < workers.size(); ++w)
    record.workers.push_back(storage::WorkerRecord{w, workers[w].info.rank});
  if (!store.PutCapture(record).ok()) state.SkipWithError("record failed");
}

uint64_t DirectoryBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) total += entry.file_size();
  }
  return total;
}

std::string FreshDir() {
  static int n = 0;
  const std::string dir =
      (std::filesystem::temp_directory_path() /
       ("podscope-store-bench-" + std::to_string(getpid()) + "-" + std::to_string(n++)))
          .string();
  std::filesystem::remove_all(dir);
  return dir;
}

void BM_StoreWrite(benchmark::State& state) {
  const uint64_t events = JobEvents(state.range(0));
  uint64_t disk_bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string dir = FreshDir();
    auto store = storage::RocksDbTraceStore::Open({.path = dir});
    state.ResumeTiming();
    WriteJob(**store, state.range(0), state);
    state.PauseTiming();
    store->reset();  // closes: memtables are flushed to files
    disk_bytes = DirectoryBytes(dir);
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(events) * state.iterations());
  state.counters["events"] = static_cast<double>(events);
  state.counters["disk_bytes_per_event"] =
      static_cast<double>(disk_bytes) / static_cast<double>(events);
}
BENCHMARK(BM_StoreWrite)
    ->ArgName("dense")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_StoreRead(benchmark::State& state) {
  const std::string dir = FreshDir();
  {
    auto store = storage::RocksDbTraceStore::Open({.path = dir});
    WriteJob(**store, state.range(0), state);
  }
  auto store = storage::RocksDbTraceStore::Open({.path = dir});
  for (auto _ : state) {
    absl::StatusOr<common::Capture> capture = storage::LoadCapture(**store, "bench");
    if (!capture.ok()) state.SkipWithError("load failed");
    benchmark::DoNotOptimize(capture->workers.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(JobEvents(state.range(0))) * state.iterations());
  store->reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_StoreRead)
    ->ArgName("dense")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace podscope::bench

BENCHMARK_MAIN();
