// Columnar chunk encode/decode throughput (events/s and encoded bytes/s).
#include <benchmark/benchmark.h>

#include "bench/bench_fixture.h"
#include "common/chunk_codec.h"
#include "common/kineto/kineto_importer.h"

namespace podscope::bench {
namespace {

common::WorkerTrace ImportedTrace(int copies) {
  common::KinetoImporter importer;
  auto result = importer.ImportJson("bench.json", ReplicatedKinetoJson(copies));
  if (!result.ok()) std::abort();
  return std::move(result->workers.at(0));
}

void BM_ChunkEncode(benchmark::State& state) {
  const common::WorkerTrace trace = ImportedTrace(static_cast<int>(state.range(0)));
  size_t bytes = 0;
  for (auto _ : state) {
    std::string encoded = common::EncodeChunkToBytes(trace, {"bench", 0, 0});
    bytes = encoded.size();
    benchmark::DoNotOptimize(encoded.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(trace.Counts().Total()) * state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["bytes_per_event"] = static_cast<double>(bytes) / trace.Counts().Total();
}
BENCHMARK(BM_ChunkEncode)->Arg(1)->Arg(32)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ChunkDecode(benchmark::State& state) {
  const common::WorkerTrace trace = ImportedTrace(static_cast<int>(state.range(0)));
  const std::string encoded = common::EncodeChunkToBytes(trace, {"bench", 0, 0});
  for (auto _ : state) {
    auto decoded = common::DecodeChunkFromBytes(encoded);
    if (!decoded.ok()) {
      state.SkipWithError("decode failed");
      return;
    }
    benchmark::DoNotOptimize(decoded->kernels.start.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(trace.Counts().Total()) * state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(encoded.size()) * state.iterations());
}
BENCHMARK(BM_ChunkDecode)->Arg(1)->Arg(32)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace podscope::bench

BENCHMARK_MAIN();
