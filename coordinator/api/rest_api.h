// The REST API v1 (docs/gpu-efficiency.md) over the trace store and the analysis engine: health,
// metrics, captures, imports, analyses (cached per capture generation) and trace export.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "analysis/analysis_run.h"
#include "common/cancellation.h"
#include "common/kineto/kineto_importer.h"
#include "common/time_source.h"
#include "coordinator/api/analysis_cache.h"
#include "coordinator/api/memory_budget.h"
#include "coordinator/api/shared_work.h"
#include "coordinator/capture/capture_importer.h"
#include "http/http_server.h"
#include "http/http_types.h"
#include "storage/trace_store.h"

namespace podscope::coordinator {

struct ApiLimits {
  // The JSON one import may parse, after gunzip; parsing takes ~5 more bytes per byte, so this
  // bounds an import's memory. Gzip may inflate at most max_inflate_ratio times its size.
  uint64_t max_document_bytes = 512ull << 20;
  uint64_t max_inflate_ratio = 200;
  uint32_t max_ranks_per_capture = 65536;
  // Cached analysis results, all captures together (least recently used evicted first).
  uint64_t max_analysis_cache_bytes = 256ull << 20;
  uint64_t max_events_per_worker = 50'000'000;
  // An export streams one worker at a time, so its size costs no memory; this only caps what one
  // request may send (0: no cap).
  uint64_t max_export_bytes = 0;
  // Reports that load a whole capture run together only while their estimates (memory_budget.h)
  // fit in this; at most max_queued_analyses wait, and the next is answered 503.
  uint64_t analysis_memory_budget_bytes = 2ull << 30;
  size_t max_queued_analyses = 16;
  size_t max_string_bytes = 1 << 20;
};

// Owned by the daemon's main; handlers run on the HTTP server's threads. Every multi-step change
// to a stored capture (an import's record and events, a delete, an analysis cached for a
// generation, retention) holds `mutations` from reading the record it acts on to writing its
// result: one serialised state machine per store, so no change acts on a record another has
// half-made. Parsing an import happens before, outside the lock.
class RestApi {
 public:
  RestApi(storage::TraceStore& store, ApiLimits limits, const common::TimeSource& time,
          absl::Mutex& mutations);

  // Adds every route to `router`.
  void Register(http::Router& router);
  // What heavy reports take their memory from (tests hold it to see a report wait or refused).
  MemoryBudget& memory_budget() { return budget_; }
  // Answers GET /v1/captures/{id} for captures still running (set by the daemon when it runs
  // the capture scheduler); returns nullopt for captures that are not live.
  // Appended to import ids ("-SHARD" on a sharded coordinator).
  void set_id_suffix(std::string suffix) { importer_.set_id_suffix(std::move(suffix)); }
  void set_live_lookup(
      std::function<std::optional<storage::CaptureRecord>(const std::string&)> lookup) {
    live_lookup_ = std::move(lookup);
  }
  // Counters for /metrics (may be set after Register).
  void set_http_counters(const http::HttpCounters* counters) { counters_ = counters; }
  // Another part of the daemon's /metrics (Prometheus text appended to the answer); set before
  // serving.
  void add_metrics_source(std::function<void(std::string*)> source) {
    metrics_sources_.push_back(std::move(source));
  }
  // Marks captures left in "importing" by a crash as failed. Call once at start-up.
  absl::Status RecoverInterruptedImports();
  // Indexes the analyses the store holds cached (evicting past the bound). Once, at start-up.
  absl::Status LoadCacheIndex();
  // Ends the reports being computed, before the next worker each reads, and every one asked for
  // from now on, with 503: the daemon is stopping, and a report is cheaper to ask again than to
  // wait for past the stop's grace.
  void CancelAnalyses() { stopping_.Cancel(); }
  // Reports computed, and answers shared with an identical request computing them.
  uint64_t reports_computed() const { return reports_computed_.load(); }
  uint64_t reports_shared() const { return reports_shared_.load(); }
  // Report requests waiting for an identical one's answer now.
  size_t reports_waiting() const { return reports_in_flight_.waiting(); }

 private:
  http::HttpResponse Health(http::HttpRequest& request);
  http::HttpResponse Ready(http::HttpRequest& request);
  http::HttpResponse Metrics(http::HttpRequest& request);
  http::HttpResponse OpenApi(http::HttpRequest& request);
  http::HttpResponse ListCaptures(http::HttpRequest& request);
  http::HttpResponse GetCapture(http::HttpRequest& request);
  http::HttpResponse DeleteCapture(http::HttpRequest& request);
  http::HttpResponse Import(http::HttpRequest& request);
  http::HttpResponse Report(http::HttpRequest& request);
  // A report not in the cache: computed from the store, then cached.
  http::HttpResponse ComputeReport(const storage::CaptureRecord& record,
                                   const analysis::AnalysisRequest& request, bool table,
                                   const std::string& cache_key,
                                   const std::function<bool()>& abandoned);
  http::HttpResponse Trace(http::HttpRequest& request);
  std::optional<http::HttpResponse> NotAnalysable(const storage::CaptureRecord& record) const;

  storage::TraceStore& store_;
  ApiLimits limits_;
  const common::TimeSource& time_;
  const http::HttpCounters* counters_ = nullptr;
  std::vector<std::function<void(std::string*)>> metrics_sources_;
  std::function<std::optional<storage::CaptureRecord>(const std::string&)> live_lookup_;
  absl::Mutex& mutations_;
  AnalysisCacheIndex cache_;
  MemoryBudget budget_;
  // Deletes cached entries from the store and takes their bytes off their captures' records.
  absl::Status DropCached(const std::vector<AnalysisCacheIndex::Entry>& entries)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutations_);
  CaptureImporter importer_;  // POST /v1/captures:import
  SharedWork<http::HttpResponse> reports_in_flight_;
  common::Cancellation stopping_;
  std::atomic<uint64_t> reports_computed_{0}, reports_shared_{0}, reports_abandoned_{0};
};

// The OpenAPI 3 document of the API (coordinator/api/openapi.json, embedded at build time).
std::string_view OpenApiDocument();

}  // namespace podscope::coordinator
