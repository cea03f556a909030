// Density: every report and both exports over workers as dense as real ranks, swept in events per
// worker (150 k, 1.5 M: five to seven seconds of a real rank, 9 M: a 30 s window) and in workers
// (1, 8, 64). It prints nanoseconds an event, which stays flat while the work grows linearly in
// events, and the process's peak RSS so far (run the sweep in its order: sizes grow).
//
// Workers are made once per size, two dense ranks of the simulator with rank 1 10% slower (so the
// stragglers' passes run), and served as many workers as the sweep asks: worker w is rank 1's
// events when w == 1 and rank 0's otherwise, relabelled rank w, so a worker costs what a real one
// does while 64 workers of 9 M events never sit in memory at once.
//
//   build/bench/podscope_density_bench --benchmark_filter='report/summary'
//   build/bench/podscope_density_bench --benchmark_min_time=0.01   (the whole sweep)
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "analysis/analysis_run.h"
#include "common/chrome/chrome_exporter.h"
#include "common/heap_reuse.h"
#include "common/perfetto/perfetto_exporter.h"
#include "sim/workload_model.h"

namespace podscope::bench {
namespace {

// Two simulated dense ranks of about `events` events each.
constexpr int64_t kEventsPerStep = 1'507;  // a dense step, its launch calls included
struct Timelines {
  common::Capture capture;
  uint64_t events_per_worker = 0;
};

const Timelines& TimelinesOf(int64_t events) {
  // One size at a time: the 9 M one alone is gigabytes.
  static int64_t made_events = -1;
  static std::unique_ptr<Timelines> made;
  if (made_events != events) {
    made.reset();
    made = std::make_unique<Timelines>();
    sim::WorkloadOptions o;
    (void)sim::ApplyPreset("dense", &o);
    o.ranks = 2;
    o.steps = static_cast<int32_t>(events / kEventsPerStep);
    o.slowdowns.push_back({.rank = 1, .factor = 1.1});
    made->capture = sim::SimulateJob(o).capture;
    made->events_per_worker = made->capture.workers[0].Counts().Total();
    made_events = events;
  }
  return *made;
}

// `workers` workers, each one of the two timelines relabelled.
class ReplicatedWorkers final : public common::WorkerSource {
 public:
  ReplicatedWorkers(const Timelines& timelines, int workers)
      : timelines_(timelines), workers_(workers) {}
  absl::Status ForEachWorker(
      const std::function<absl::Status(const common::WorkerTrace& trace)>& visit) override {
    for (int w = 0; w < workers_; ++w) {
      // The timeline's own description is restored after the visit: it is shared.
      auto& trace = const_cast<common::WorkerTrace&>(timelines_.capture.workers[w == 1 ? 1 : 0]);
      const common::WorkerInfo info = trace.info;
      trace.info.rank = w;
      trace.info.world_size = workers_;
      trace.info.local_rank = w % 8;
      trace.info.host = "node-" + std::to_string(w / 8);
      trace.info.pid = 1000 + w;
      for (size_t i = 0; i < trace.collectives.size(); ++i) {
        trace.collectives.rank[i] = w;
        trace.collectives.nranks[i] = workers_;
      }
      const absl::Status status = visit(trace);
      const int32_t rank = info.rank;
      trace.info = info;
      for (size_t i = 0; i < trace.collectives.size(); ++i) {
        trace.collectives.rank[i] = rank;
        trace.collectives.nranks[i] = 2;
      }
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }

 private:
  const Timelines& timelines_;
  const int workers_;
};

double PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

void Finish(benchmark::State& state, uint64_t events) {
  state.counters["events"] = static_cast<double>(events);
  state.counters["ns_per_event"] = benchmark::Counter(
      static_cast<double>(events),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["peak_rss_mb"] = PeakRssMb();
}

void BM_Report(benchmark::State& state, const std::string& report) {
  const Timelines& timelines = TimelinesOf(state.range(0));
  const int workers = static_cast<int>(state.range(1));
  analysis::AnalysisRequest request;
  request.reports = {report};
  if (absl::Status s = analysis::ValidateRequest(&request); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  for (auto _ : state) {
    ReplicatedWorkers source(timelines, workers);
    common::Capture tables;
    absl::StatusOr<analysis::AnalysisResults> results =
        analysis::RunAnalysesByWorker(source, request, &tables);
    if (!results.ok()) {
      state.SkipWithError(std::string(results.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(results);
  }
  Finish(state, timelines.events_per_worker * static_cast<uint64_t>(workers));
}

void BM_Export(benchmark::State& state, bool perfetto) {
  const Timelines& timelines = TimelinesOf(state.range(0));
  const int workers = static_cast<int>(state.range(1));
  uint64_t bytes = 0;
  auto sink = [&bytes](std::string_view piece) {
    bytes += piece.size();
    return absl::OkStatus();
  };
  for (auto _ : state) {
    ReplicatedWorkers source(timelines, workers);
    absl::StatusOr<common::ExportStats> stats = perfetto
                                                    ? common::WritePerfettoTrace(source, {}, sink)
                                                    : common::WriteChromeTrace(source, {}, sink);
    if (!stats.ok()) {
      state.SkipWithError(std::string(stats.status().message()).c_str());
      return;
    }
  }
  state.counters["bytes_per_event"] = static_cast<double>(bytes) /
                                      static_cast<double>(state.iterations()) /
                                      static_cast<double>(timelines.events_per_worker * workers);
  Finish(state, timelines.events_per_worker * static_cast<uint64_t>(workers));
}

// Size-major, smallest first: one size's timelines are made once for every benchmark of it, and
// peak RSS only grows.
[[maybe_unused]] const bool kRegistered = [] {
  common::KeepFreedHeapForReuse(512 << 20);  // as the coordinator does
  for (int64_t events : {150'000, 1'500'000, 9'000'000}) {
    std::vector<benchmark::internal::Benchmark*> size;
    for (std::string_view report : analysis::kReportNames) {
      const std::string name(report);
      size.push_back(benchmark::RegisterBenchmark(
          ("report/" + name).c_str(), [name](benchmark::State& s) { BM_Report(s, name); }));
    }
    size.push_back(benchmark::RegisterBenchmark("export/chrome",
                                                [](benchmark::State& s) { BM_Export(s, false); }));
    size.push_back(benchmark::RegisterBenchmark("export/perfetto",
                                                [](benchmark::State& s) { BM_Export(s, true); }));
    for (benchmark::internal::Benchmark* b : size) {
      for (int64_t workers : {1, 8, 64}) b->Args({events, workers});
      b->ArgNames({"events_per_worker", "workers"})->Unit(benchmark::kMillisecond)->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
}  // namespace podscope::bench

BENCHMARK_MAIN();
