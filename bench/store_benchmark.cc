// Trace store write and read throughput (events/s) and bytes on disk per event, on a simulated
// 32-rank capture (~1 M events).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>

#include "sim/workload_model.h"
#include "storage/rocksdb_trace_store.h"

namespace podscope::bench {
namespace {

const sim::Workload& Job() {
  static const sim::Workload job = [] {
    sim::WorkloadOptions o;
    o.ranks = 32;
    o.steps = 50;
    return sim::SimulateJob(o);
  }();
  return job;
}

uint64_t JobEvents() {
  uint64_t n = 0;
  for (const common::WorkerTrace& w : Job().capture.workers) n += w.Counts().Total();
  return n;
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
  const uint64_t events = JobEvents();
  uint64_t disk_bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string dir = FreshDir();
    auto store = storage::RocksDbTraceStore::Open({.path = dir});
    state.ResumeTiming();
    const auto& workers = Job().capture.workers;
    for (uint32_t w = 0; w < workers.size(); ++w) {
      if (!(*store)->PutChunk("bench", w, 0, workers[w]).ok()) state.SkipWithError("put failed");
    }
    storage::CaptureRecord record;
    record.id = "bench";
    record.state = storage::CaptureState::kComplete;
    if (!(*store)->PutCapture(record).ok()) state.SkipWithError("record failed");
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
BENCHMARK(BM_StoreWrite)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_StoreRead(benchmark::State& state) {
  const std::string dir = FreshDir();
  {
    auto store = storage::RocksDbTraceStore::Open({.path = dir});
    const auto& workers = Job().capture.workers;
    for (uint32_t w = 0; w < workers.size(); ++w)
      (void)(*store)->PutChunk("bench", w, 0, workers[w]);
    storage::CaptureRecord record;
    record.id = "bench";
    (void)(*store)->PutCapture(record);
  }
  auto store = storage::RocksDbTraceStore::Open({.path = dir});
  for (auto _ : state) {
    absl::StatusOr<common::Capture> capture = storage::LoadCapture(**store, "bench");
    if (!capture.ok()) state.SkipWithError("load failed");
    benchmark::DoNotOptimize(capture->workers.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(JobEvents()) * state.iterations());
  store->reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_StoreRead)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace podscope::bench

BENCHMARK_MAIN();
