// Kineto import throughput, single thread: JSON bytes/s and trace events/s.
#include <benchmark/benchmark.h>

#include "bench/bench_fixture.h"
#include "common/kineto/kineto_importer.h"

namespace podscope::bench {
namespace {

void BM_KinetoImport(benchmark::State& state) {
  const std::string& json = ReplicatedKinetoJson(static_cast<int>(state.range(0)));
  common::KinetoImporter importer;
  uint64_t events = 0;
  for (auto _ : state) {
    auto result = importer.ImportJson("bench.json", json);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    events = result->stats.events;
    benchmark::DoNotOptimize(result->workers.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(json.size()) * state.iterations());
  state.SetItemsProcessed(static_cast<int64_t>(events) * state.iterations());
  state.counters["json_MB"] = json.size() / 1e6;
}
// 1 copy = the 1.76 MB fixture (4,855 events); 32 copies = 56 MB (155k events).
BENCHMARK(BM_KinetoImport)->Arg(1)->Arg(32)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace podscope::bench

BENCHMARK_MAIN();
