#include "coordinator/api/rest_api.h"

#include <charconv>
#include <filesystem>
#include <map>

#include "analysis/analysis_run.h"
#include "analysis/report/report_json.h"
#include "analysis/report/report_table.h"
#include "common/capture_filter.h"
#include "common/chrome/chrome_exporter.h"
#include "common/file_io.h"
#include "common/json_writer.h"
#include "common/parse_number.h"
#include "common/perfetto/perfetto_exporter.h"
#include "common/ranges.h"
#include "common/status_format.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "coordinator/api/capture_json.h"
#include "coordinator/api/status_response.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace podscope::coordinator {
namespace {

using storage::CaptureRecord;
using storage::CaptureState;

template <typename T>
bool ParseNumber(const std::string& text, T* out) {
  if (text.empty()) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && p == text.data() + text.size();
}

// Query parameters of the analysis routes: the same names as `podscope analyze` options.
absl::Status RequestFromQuery(const http::HttpRequest& r, analysis::AnalysisRequest* request) {
  static const std::map<std::string, int> kKnown = {
      {"window", 0}, {"clocks", 0},          {"link_gbytes_per_s", 0},
      {"params", 0}, {"bytes_per_param", 0}, {"step_pattern", 0},
      {"top", 0},    {"format", 0},          {"ranks", 0},
      {"steps", 0},  {"allow_mixed", 0},     {"detail", 0},
      {"wide", 0}};
  for (const auto& [key, value] : r.query) {
    if (key == "link_gbps") {  // the name it had, in Gbit/s, before bandwidth had one unit
      return absl::InvalidArgumentError(
          "link_gbps (Gbit/s) is now link_gbytes_per_s, in GB/s like every bandwidth podscope "
          "reports: a 400 Gbit/s link is 50");
    }
    if (!kKnown.count(key))
      return absl::InvalidArgumentError(common::StrCat("unknown query parameter \"", key, "\""));
    if (value.size() > 1024)
      return absl::InvalidArgumentError(
          common::StrCat("query parameter \"", key, "\" is too long"));
  }
  const std::string window = r.Query("window", "steps");
  if (window != "steps" && window != "hta")
    return absl::InvalidArgumentError("window must be steps or hta");
  request->window = window == "hta" ? analysis::WindowMode::kHta : analysis::WindowMode::kSteps;
  const std::string clocks = r.Query("clocks", "auto");
  if (clocks == "aligned") {
    request->communication.clocks = analysis::ClockTrust::kAligned;
  } else if (clocks == "unaligned") {
    request->communication.clocks = analysis::ClockTrust::kUnaligned;
  } else if (clocks != "auto") {
    return absl::InvalidArgumentError("clocks must be auto, aligned or unaligned");
  }
  if (r.query.count("link_gbytes_per_s")) {
    absl::StatusOr<double> link = common::ParseDouble(r.Query("link_gbytes_per_s"));
    if (!link.ok()) return absl::InvalidArgumentError("link_gbytes_per_s must be a finite number");
    request->bandwidth.link_gbytes_per_s = *link;
  }
  if (r.query.count("params") && !ParseNumber(r.Query("params"), &request->bandwidth.params)) {
    return absl::InvalidArgumentError("params must be an integer");
  }
  if (r.query.count("bytes_per_param") &&
      !ParseNumber(r.Query("bytes_per_param"), &request->bandwidth.bytes_per_param)) {
    return absl::InvalidArgumentError("bytes_per_param must be an integer");
  }
  if (r.query.count("top") && !ParseNumber(r.Query("top"), &request->top_kernels)) {
    return absl::InvalidArgumentError("top must be an integer");
  }
  request->top_workers = request->top_kernels;  // the tables' workers, as `podscope analyze --top`
  if (r.query.count("ranks")) {
    ASSIGN_OR_RETURN(request->ranks, common::ParseRankList(r.Query("ranks")));
  }
  if (r.query.count("steps"))
    RETURN_IF_ERROR(
        common::ParseIntRange(r.Query("steps"), &request->first_step, &request->last_step));
  const std::string mixed = r.Query("allow_mixed", "false");
  if (mixed != "true" && mixed != "false")
    return absl::InvalidArgumentError("allow_mixed must be true or false");
  request->allow_mixed = mixed == "true";
  const std::string wide = r.Query("wide", "false");
  if (wide != "true" && wide != "false")
    return absl::InvalidArgumentError("wide must be true or false");
  request->wide_names = wide == "true";
  request->steps.marker_pattern = r.Query("step_pattern");
  const std::string detail = r.Query("detail", "full");
  if (detail != "full" && detail != "workers")
    return absl::InvalidArgumentError("detail must be full or workers");
  request->workers_only = detail == "workers";
  const std::string format = r.Query("format", "json");
  if (format != "json" && format != "table")
    return absl::InvalidArgumentError("format must be json or table");
  return analysis::ValidateRequest(request);
}

// The cache key of a validated request: every parameter, defaults spelled out, in one order, so
// that the many ways of writing one request ("", "?window=steps", "?format=json&window=steps")
// share one entry.
std::string CacheKey(std::string_view report, uint64_t generation,
                     const analysis::AnalysisRequest& request, std::string_view format) {
  return fmt::format(
      "{}@{}|window={}|clocks={}|link_gbytes_per_s={:.17g}|params={}|bytes_per_param={}|top={}|"
      "format={}|"
      "ranks={}|steps={}-{}|allow_mixed={}|workers_only={}|wide={}|step_pattern={}",
      report, generation, request.window == analysis::WindowMode::kHta ? "hta" : "steps",
      static_cast<int>(request.communication.clocks), request.bandwidth.link_gbytes_per_s,
      request.bandwidth.params, request.bandwidth.bytes_per_param, request.top_kernels, format,
      fmt::join(request.ranks, ","), request.first_step, request.last_step, request.allow_mixed,
      request.workers_only, request.wide_names, request.steps.marker_pattern);
}

}  // namespace

RestApi::RestApi(storage::TraceStore& store, ApiLimits limits, const common::TimeSource& time,
                 absl::Mutex& mutations)
    : store_(store),
      limits_(limits),
      time_(time),
      mutations_(mutations),
      cache_(limits.max_analysis_cache_bytes),
      budget_(limits.analysis_memory_budget_bytes, limits.max_queued_analyses),
      importer_(
          store, mutations,
          ImportLimits{.max_document_bytes = limits.max_document_bytes,
                       .max_inflate_ratio = limits.max_inflate_ratio,
                       .max_events_per_worker = limits.max_events_per_worker,
                       .max_string_bytes = limits.max_string_bytes,
                       .max_ranks_per_capture = limits.max_ranks_per_capture},
          [this](const std::string& id) {
            mutations_.AssertHeld();  // the importer calls this under the lock
            return DropCached(cache_.ForgetCapture(id));
          },
          time) {}

absl::Status RestApi::LoadCacheIndex() {
  absl::MutexLock lock(&mutations_);
  std::vector<AnalysisCacheIndex::Entry> evicted;
  absl::Status s = store_.ForEachAnalysis(
      [&](std::string_view capture_id, std::string_view key, uint64_t bytes) {
        for (AnalysisCacheIndex::Entry& e :
             cache_.Insert(std::string(capture_id), std::string(key), bytes)) {
          evicted.push_back(std::move(e));
        }
      });
  if (!s.ok()) return s;
  return DropCached(evicted);
}

absl::Status RestApi::DropCached(const std::vector<AnalysisCacheIndex::Entry>& entries) {
  for (const AnalysisCacheIndex::Entry& e : entries) {
    RETURN_IF_ERROR(store_.DeleteAnalysis(e.capture_id, e.key));
    absl::StatusOr<CaptureRecord> owner = store_.GetCapture(e.capture_id);
    if (!owner.ok()) continue;  // deleted with its capture already
    owner->stored_bytes -= std::min(owner->stored_bytes, e.bytes);
    RETURN_IF_ERROR(store_.PutCapture(*owner));
  }
  return absl::OkStatus();
}

void RestApi::Register(http::Router& router) {
  auto bind = [this](http::HttpResponse (RestApi::*method)(http::HttpRequest&)) {
    return [this, method](http::HttpRequest& r) { return (this->*method)(r); };
  };
  // Probes stay open; /metrics needs read unless the daemon's config opens it (Router::SetAccess).
  router.Add({.method = "GET",
              .pattern = "/healthz",
              .handler = bind(&RestApi::Health),
              .access = http::Access::kOpen});
  router.Add({.method = "GET",
              .pattern = "/readyz",
              .handler = bind(&RestApi::Ready),
              .access = http::Access::kOpen});
  router.Add({.method = "GET",
              .pattern = "/metrics",
              .handler = bind(&RestApi::Metrics),
              .access = http::Access::kRead});
  router.Add({.method = "GET",
              .pattern = "/v1/openapi.json",
              .handler = bind(&RestApi::OpenApi),
              .access = http::Access::kRead});
  router.Add({.method = "GET",
              .pattern = "/v1/captures",
              .handler = bind(&RestApi::ListCaptures),
              .access = http::Access::kRead});
  router.Add({.method = "POST",
              .pattern = "/v1/captures:import",
              .handler = bind(&RestApi::Import),
              .heavy = true,
              .streamed_upload = true,
              .access = http::Access::kAdmin});
  router.Add({.method = "GET",
              .pattern = "/v1/captures/{id}",
              .handler = bind(&RestApi::GetCapture),
              .access = http::Access::kRead});
  router.Add({.method = "DELETE",
              .pattern = "/v1/captures/{id}",
              .handler = bind(&RestApi::DeleteCapture),
              .access = http::Access::kAdmin});
  // Streamed on the stream pool.
  router.Add({.method = "GET",
              .pattern = "/v1/captures/{id}/trace",
              .handler = bind(&RestApi::Trace),
              .access = http::Access::kRead});
  router.Add({.method = "GET",
              .pattern = "/v1/captures/{id}/{report}",
              .handler = bind(&RestApi::Report),
              .heavy = true,
              .access = http::Access::kRead});
}

absl::Status RestApi::RecoverInterruptedImports() {
  storage::CaptureFilter filter;
  filter.state = CaptureState::kImporting;
  filter.limit = 100000;
  absl::StatusOr<std::vector<CaptureRecord>> stuck = store_.ListCaptures(filter);
  if (!stuck.ok()) return stuck.status();
  for (CaptureRecord& r : *stuck) {
    r.state = CaptureState::kFailed;
    r.error = "import interrupted (coordinator restarted)";
    r.updated_ns = time_.Now();
    RETURN_IF_ERROR(store_.PutCapture(r));
  }
  return absl::OkStatus();
}

http::HttpResponse RestApi::Health(http::HttpRequest&) {
  return http::HttpResponse::Json(200, "{\"status\":\"ok\"}\n");
}

http::HttpResponse RestApi::Ready(http::HttpRequest&) {
  absl::StatusOr<std::vector<CaptureRecord>> probe = store_.ListCaptures({.limit = 1});
  if (!probe.ok())
    return http::HttpResponse::Problem(503, "Service Unavailable",
                                       std::string(probe.status().message()));
  return http::HttpResponse::Json(200, "{\"status\":\"ready\"}\n");
}

http::HttpResponse RestApi::Metrics(http::HttpRequest&) {
  std::string out;
  if (counters_ != nullptr) {
    common::StrAppend(
        &out, "# HELP podscope_http_requests_total HTTP requests received.\n",
        "# TYPE podscope_http_requests_total counter\n", "podscope_http_requests_total ",
        counters_->requests.load(), "\n",
        "# HELP podscope_http_responses_total HTTP responses by status class.\n",
        "# TYPE podscope_http_responses_total counter\n",
        "podscope_http_responses_total{class=\"2xx\"} ", counters_->responses_2xx.load(), "\n",
        "podscope_http_responses_total{class=\"4xx\"} ", counters_->responses_4xx.load(), "\n",
        "podscope_http_responses_total{class=\"5xx\"} ", counters_->responses_5xx.load(), "\n",
        "# HELP podscope_http_request_seconds_total Time spent serving requests.\n",
        "# TYPE podscope_http_request_seconds_total counter\n",
        "podscope_http_request_seconds_total ",
        fmt::format("{:.6f}", counters_->latency_ns_total.load() / 1e9), "\n",
        "# HELP podscope_http_open_connections HTTP connections open now.\n",
        "# TYPE podscope_http_open_connections gauge\n", "podscope_http_open_connections ",
        counters_->open_connections.load(), "\n",
        "# HELP podscope_http_rejected_connections_total Connections refused, by reason.\n",
        "# TYPE podscope_http_rejected_connections_total counter\n",
        "podscope_http_rejected_connections_total{reason=\"server_full\"} ",
        counters_->rejected_server_full.load(), "\n",
        "podscope_http_rejected_connections_total{reason=\"client_full\"} ",
        counters_->rejected_client_full.load(), "\n",
        "podscope_http_rejected_connections_total{reason=\"no_descriptors\"} ",
        counters_->rejected_no_descriptors.load(), "\n",
        "podscope_http_rejected_connections_total{reason=\"token_full\"} ",
        counters_->rejected_token_full.load(), "\n",
        "# HELP podscope_http_timeouts_total Connections dropped for not moving, by phase.\n",
        "# TYPE podscope_http_timeouts_total counter\n",
        "podscope_http_timeouts_total{phase=\"header\"} ", counters_->timeouts_header.load(), "\n",
        "podscope_http_timeouts_total{phase=\"body\"} ", counters_->timeouts_body.load(), "\n",
        "podscope_http_timeouts_total{phase=\"response\"} ", counters_->timeouts_response.load(),
        "\n", "# HELP podscope_http_malformed_requests_total Requests refused as malformed.\n",
        "# TYPE podscope_http_malformed_requests_total counter\n",
        "podscope_http_malformed_requests_total ", counters_->malformed_requests.load(), "\n",
        "# HELP podscope_http_tls_handshake_failures_total HTTPS connections whose handshake "
        "failed.\n",
        "# TYPE podscope_http_tls_handshake_failures_total counter\n",
        "podscope_http_tls_handshake_failures_total ", counters_->tls_handshake_failures.load(),
        "\n",
        "# HELP podscope_http_unauthenticated_connections Open connections that have not made an "
        "authorized request yet.\n",
        "# TYPE podscope_http_unauthenticated_connections gauge\n",
        "podscope_http_unauthenticated_connections ", counters_->unauthenticated_connections.load(),
        "\n",
        "# HELP podscope_http_evicted_connections_total Unauthenticated connections dropped to "
        "make room for new ones.\n",
        "# TYPE podscope_http_evicted_connections_total counter\n",
        "podscope_http_evicted_connections_total ", counters_->evicted_unauthenticated.load(), "\n",
        "# HELP podscope_http_evicted_idle_connections_total Authenticated connections idle "
        "between requests, dropped to make room for new ones.\n",
        "# TYPE podscope_http_evicted_idle_connections_total counter\n",
        "podscope_http_evicted_idle_connections_total ", counters_->evicted_idle.load(), "\n");
  }
  const std::map<std::string, std::string> unreadable = store_.UnreadableCaptures();
  common::StrAppend(&out,
                    "# HELP podscope_stored_records_unreadable Stored capture records that do not "
                    "decode: skipped by lists, kept until deleted.\n",
                    "# TYPE podscope_stored_records_unreadable gauge\n",
                    "podscope_stored_records_unreadable{kind=\"capture\"} ", unreadable.size(),
                    "\n");
  common::StrAppend(&out,
                    "# HELP podscope_reports_computed_total Reports computed from the store, "
                    "whatever their answer (not those from the cache or shared).\n",
                    "# TYPE podscope_reports_computed_total counter\n",
                    "podscope_reports_computed_total ", reports_computed(), "\n",
                    "# HELP podscope_reports_shared_total Report answers shared with an "
                    "identical request that was computing them.\n",
                    "# TYPE podscope_reports_shared_total counter\n",
                    "podscope_reports_shared_total ", reports_shared(), "\n",
                    "# HELP podscope_reports_abandoned_total Reports stopped because every "
                    "client that asked for them went away.\n",
                    "# TYPE podscope_reports_abandoned_total counter\n",
                    "podscope_reports_abandoned_total ", reports_abandoned_.load(), "\n");
  for (const auto& source : metrics_sources_) source(&out);
  std::map<CaptureState, uint64_t> by_state;
  uint64_t stored = 0;
  storage::CaptureFilter page;
  page.limit = 1000;
  while (true) {
    absl::StatusOr<std::vector<CaptureRecord>> batch = store_.ListCaptures(page);
    if (!batch.ok()) return FromStatus(batch.status());
    if (batch->empty()) break;
    for (const CaptureRecord& r : *batch) {
      ++by_state[r.state];
      stored += r.stored_bytes;
    }
    page.after_id = batch->back().id;
  }
  common::StrAppend(
      &out,
      "# HELP podscope_captures Captures in the store by state.\n# TYPE podscope_captures gauge\n");
  for (int s = 0; s < storage::kCaptureStateCount; ++s) {
    const auto state = static_cast<CaptureState>(s);
    common::StrAppend(&out, "podscope_captures{state=\"", storage::CaptureStateName(state), "\"} ",
                      by_state[state], "\n");
  }
  common::StrAppend(&out, "# HELP podscope_store_event_bytes Encoded event bytes in the store.\n",
                    "# TYPE podscope_store_event_bytes gauge\npodscope_store_event_bytes ", stored,
                    "\n");
  http::HttpResponse r = http::HttpResponse::Json(200, std::move(out));
  r.content_type = "text/plain; version=0.0.4";
  return r;
}

http::HttpResponse RestApi::OpenApi(http::HttpRequest&) {
  return http::HttpResponse::Json(200, std::string(OpenApiDocument()));
}

http::HttpResponse RestApi::ListCaptures(http::HttpRequest& r) {
  storage::CaptureFilter filter;
  filter.job = r.Query("job");
  filter.after_id = r.Query("after");
  if (r.query.count("state")) {
    filter.state = storage::CaptureStateFromName(r.Query("state"));
    if (!filter.state)
      return http::HttpResponse::Problem(
          400, "Bad Request", common::StrCat("unknown state \"", r.Query("state"), "\""));
  }
  if (r.query.count("limit") &&
      (!ParseNumber(r.Query("limit"), &filter.limit) || filter.limit == 0 || filter.limit > 1000)) {
    return http::HttpResponse::Problem(400, "Bad Request", "limit must be an integer in 1..1000");
  }
  const size_t wanted = filter.limit;
  filter.limit = wanted + 1;  // one more tells whether there is a next page
  absl::StatusOr<std::vector<CaptureRecord>> records = store_.ListCaptures(filter);
  if (!records.ok()) return FromStatus(records.status());
  const bool more = records->size() > wanted;
  if (more) records->resize(wanted);
  return http::HttpResponse::Json(200, CaptureListJson(*records, more));
}

http::HttpResponse RestApi::GetCapture(http::HttpRequest& r) {
  // A capture still running is answered from the scheduler's memory, which is ahead of the store.
  if (live_lookup_) {
    if (std::optional<CaptureRecord> live = live_lookup_(r.params["id"])) {
      common::JsonWriter w;
      WriteCaptureJson(w, *live);
      w.EndLine();
      return http::HttpResponse::Json(200, std::move(w.buffer()));
    }
  }
  absl::StatusOr<CaptureRecord> record = store_.GetCapture(r.params["id"]);
  if (!record.ok()) return FromStatus(record.status());
  common::JsonWriter w;
  WriteCaptureJson(w, *record);
  w.EndLine();
  return http::HttpResponse::Json(200, std::move(w.buffer()));
}

http::HttpResponse RestApi::DeleteCapture(http::HttpRequest& r) {
  const std::string id = r.params["id"];
  if (absl::Status s = storage::ValidateCaptureId(id); !s.ok()) return FromStatus(s);
  absl::MutexLock lock(&mutations_);
  // A capture still running belongs to the scheduler: it would write the record back.
  if (live_lookup_) {
    if (std::optional<CaptureRecord> live = live_lookup_(id)) {
      return http::HttpResponse::Problem(
          409, "Conflict",
          common::StrCat("capture ", id, " is ", storage::CaptureStateName(live->state),
                         "; cancel it first (POST /v1/captures/", id, ":cancel)"));
    }
  }
  absl::StatusOr<CaptureRecord> record = store_.GetCapture(id);
  // A record that does not decode can still be deleted (it is listed on /metrics).
  const bool unreadable = !record.ok() && absl::IsDataLoss(record.status());
  if (!record.ok() && !unreadable) return FromStatus(record.status());
  if (absl::Status s = store_.DeleteCapture(id); !s.ok()) return FromStatus(s);
  cache_.ForgetCapture(id);  // the store's range delete took the entries themselves
  if (unreadable) {
    spdlog::info("deleted capture {} (its record did not decode: {}) for {}", id,
                 std::string(record.status().message()), r.peer);
  } else {
    spdlog::info("deleted capture {} (job '{}', {} workers, {} events) for {}", id, record->job,
                 record->workers.size(), record->events, r.peer);
  }
  http::HttpResponse response;
  response.status = 204;
  return response;
}

// POST /v1/captures:import?job=J[&capture=ID][&rank=N][&name=FILE]: the body is one trace file
// (Kineto JSON or a podscope export, gzip or not). Repeat with the same capture id to add ranks.
http::HttpResponse RestApi::Import(http::HttpRequest& r) {
  // None of these is a type a cross-site form or a no-CORS fetch may send, and neither is none.
  const std::string content_type = r.Header("content-type");
  if (content_type != "application/json" && content_type != "application/gzip" &&
      content_type != "application/octet-stream" && content_type != "application/x-gzip") {
    return http::HttpResponse::Problem(
        415, "Unsupported Media Type",
        common::StrCat("send the trace file as application/json, application/gzip or "
                       "application/octet-stream, not ",
                       content_type.empty() ? "without a Content-Type" : content_type));
  }
  std::string name = r.Query("name", "upload.json");
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos || name == "." ||
      name == ".." || name.size() > 255) {
    return http::HttpResponse::Problem(400, "Bad Request",
                                       "name must be a plain file name (no path)");
  }
  int32_t rank = -1;
  if (r.query.count("rank") && (!ParseNumber(r.Query("rank"), &rank) || rank < 0)) {
    return http::HttpResponse::Problem(400, "Bad Request", "rank must be a non-negative integer");
  }
  int32_t index = -1;
  if (r.query.count("index") && (!ParseNumber(r.Query("index"), &index) || index < 0)) {
    return http::HttpResponse::Problem(400, "Bad Request", "index must be a non-negative integer");
  }
  absl::StatusOr<CaptureRecord> imported = importer_.Import({.capture_id = r.Query("capture"),
                                                             .job = r.Query("job", "imported"),
                                                             .rank = rank,
                                                             .index = index,
                                                             .name = name,
                                                             .path = r.body_file});
  if (!imported.ok()) {
    const absl::Status& s = imported.status();
    if (s.GetPayload(kTraceFileErrorPayload).has_value()) {
      return http::HttpResponse::Problem(
          s.code() == absl::StatusCode::kResourceExhausted ? 413 : 400, "Invalid trace file",
          std::string(s.message()));
    }
    if (s.code() == absl::StatusCode::kAlreadyExists) {
      return http::HttpResponse::Problem(409, "Conflict", std::string(s.message()));
    }
    return FromStatus(s);
  }
  const CaptureRecord& record = *imported;
  const std::string& id = record.id;
  common::JsonWriter w;
  WriteCaptureJson(w, record);
  w.EndLine();
  http::HttpResponse response = http::HttpResponse::Json(201, std::move(w.buffer()));
  response.headers.emplace_back("Location", common::StrCat("/v1/captures/", id));
  return response;
}

// A capture whose trace is not there yet (or will never be) answers 409 saying which, rather than
// an analysis or an export of nothing that looks like a clean result.
std::optional<http::HttpResponse> RestApi::NotAnalysable(const CaptureRecord& stored) const {
  CaptureRecord record = stored;
  if (live_lookup_) {
    if (std::optional<CaptureRecord> live = live_lookup_(stored.id)) record = *std::move(live);
  }
  switch (record.state) {
    case CaptureState::kPending:
    case CaptureState::kArmed:
    case CaptureState::kCapturing:
    case CaptureState::kUploading:
    case CaptureState::kImporting:
      return http::HttpResponse::Problem(
          409, "Conflict",
          common::StrCat(
              "capture ", record.id, " is still ", CaptureStateName(record.state),
              ": ask again once it has ended (podscope capture --wait, or GET /v1/captures/",
              record.id, " until its state is complete, partial, failed or cancelled)"));
    case CaptureState::kComplete:
    case CaptureState::kPartial:
    case CaptureState::kFailed:
    case CaptureState::kCancelled:
      break;
  }
  if (record.events == 0) {
    return http::HttpResponse::Problem(
        409, "Conflict",
        common::StrCat("capture ", record.id, " (", CaptureStateName(record.state),
                       ") holds no events", record.error.empty() ? "" : ": ", record.error));
  }
  return std::nullopt;
}

// Peak memory of an analysis: per event of the worker it holds (decoded, and the analyses' working
// sets), and per event of the capture for the tables gathered from every worker and the answer
// (measured with bench/pod_scale.sh up to 1024 workers; upper bounds of the reports measured).
constexpr uint64_t kAnalysisBytesPerEvent = 160;
constexpr uint64_t kTableBytesPerEvent = 6;

http::HttpResponse RestApi::Report(http::HttpRequest& r) {
  const std::string report = r.params["report"];
  if (std::find(std::begin(analysis::kReportNames), std::end(analysis::kReportNames), report) ==
      std::end(analysis::kReportNames)) {
    return http::HttpResponse::Problem(404, "Not Found",
                                       common::StrCat("no report \"", report, "\""));
  }
  const std::string id = r.params["id"];
  absl::StatusOr<CaptureRecord> record = store_.GetCapture(id);
  if (!record.ok()) return FromStatus(record.status());
  if (std::optional<http::HttpResponse> refused = NotAnalysable(*record))
    return *std::move(refused);
  analysis::AnalysisRequest request;
  request.reports = {report};
  if (absl::Status s = RequestFromQuery(r, &request); !s.ok()) return FromStatus(s);
  // `format=table` gives the terminal tables of `podscope analyze` (text/plain).
  const bool table = r.Query("format", "json") == "table";
  const std::string cache_key =
      CacheKey(report, record->generation, request, table ? "table" : "json");
  auto respond = [table](std::string body, const char* cache) {
    http::HttpResponse response = http::HttpResponse::Json(200, std::move(body));
    if (table) response.content_type = "text/plain; charset=utf-8";
    response.headers.emplace_back("X-Podscope-Cache", cache);
    return response;
  };
  absl::StatusOr<std::optional<std::string>> cached = store_.GetAnalysis(id, cache_key);
  if (cached.ok() && cached->has_value()) {
    cache_.Touch(id, cache_key);
    return respond(std::move(**cached), "hit");
  }
  // Identical requests in flight are computed once: the others wait for that answer.
  SharedWork<http::HttpResponse>::Outcome outcome =
      // A capture deleted and made again under the same id starts its generations again.
      reports_in_flight_.Run(
          common::StrCat(id, '\0', record->created_ns, '\0', cache_key),
          [&](const std::function<bool()>& abandoned) {
            reports_computed_.fetch_add(1, std::memory_order_relaxed);
            return ComputeReport(*record, request, table, cache_key, abandoned);
          },
          r.client_gone);
  if (outcome.shared) reports_shared_.fetch_add(1, std::memory_order_relaxed);
  if (outcome.value.status == 200) {
    outcome.value.headers.emplace_back("X-Podscope-Cache", outcome.shared ? "shared" : "miss");
  }
  return std::move(outcome.value);
}

http::HttpResponse RestApi::ComputeReport(const CaptureRecord& record,
                                          const analysis::AnalysisRequest& request, bool table,
                                          const std::string& cache_key,
                                          const std::function<bool()>& abandoned) {
  const std::string& id = record.id;
  // Every report reads the store a worker at a time (analysis_run.h), holding one worker's events
  // and the small tables gathered from all of them: it takes its estimate from the memory budget
  // first, or waits for it.
  uint64_t largest_worker = 0;
  for (const storage::WorkerRecord& w : record.workers)
    largest_worker = std::max(largest_worker, w.events);
  absl::StatusOr<MemoryBudget::Grant> grant = budget_.Acquire(
      kAnalysisBytesPerEvent * largest_worker + kTableBytesPerEvent * record.events);
  if (!grant.ok()) {
    http::HttpResponse busy = http::HttpResponse::Problem(503, "Service Unavailable",
                                                          std::string(grant.status().message()));
    busy.headers.emplace_back("Retry-After", "5");
    return busy;
  }
  common::Capture capture;
  absl::StatusOr<storage::StoredWorkers> stored_workers = storage::StoredWorkers::Open(store_, id);
  if (!stored_workers.ok()) return FromStatus(stored_workers.status());
  absl::StatusOr<analysis::AnalysisResults> streamed = analysis::RunAnalysesByWorker(
      *stored_workers, request, &capture,
      [&] { return stopping_.cancelled() || (abandoned && abandoned()); });
  if (!streamed.ok() && streamed.status().code() == absl::StatusCode::kCancelled) {
    if (stopping_.cancelled()) {
      http::HttpResponse stopping = http::HttpResponse::Problem(
          503, "Service Unavailable", "the coordinator is stopping: ask again once it is back");
      stopping.headers.emplace_back("Retry-After", "5");
      return stopping;
    }
    // Nobody is left to read it; one who asks from now on computes it afresh.
    reports_abandoned_.fetch_add(1, std::memory_order_relaxed);
    http::HttpResponse left = http::HttpResponse::Problem(
        503, "Service Unavailable",
        "every client that asked for this report went away before it was done: ask again");
    left.headers.emplace_back("Retry-After", "1");
    return left;
  }
  // Ranks of different jobs or worlds make cross-rank reports meaningless (`podscope analyze`
  // refuses them too); allow_mixed=true insists.
  if (!streamed.ok() && streamed.status().code() == absl::StatusCode::kFailedPrecondition) {
    return http::HttpResponse::Problem(
        409, "Conflict", common::StrCat("capture ", id, " is ", streamed.status().message()));
  }
  if (!streamed.ok()) {
    http::HttpResponse failed = FromStatus(streamed.status());
    // The capture changed between the passes over its workers: asking again reads it afresh.
    if (streamed.status().code() == absl::StatusCode::kUnavailable)
      failed.headers.emplace_back("Retry-After", "1");
    return failed;
  }
  const common::CaptureView view(capture);
  const analysis::AnalysisResults results = *std::move(streamed);
  std::string body =
      table ? RenderTables(view, request, results) : RenderJson(view, request, results);
  {
    // Cache the result only for the generation it was computed from, and never for a capture
    // deleted meanwhile (its cache entry would outlive it). A failed write costs a recompute.
    // Its bytes count in the capture's stored bytes, which retention goes by.
    absl::MutexLock lock(&mutations_);
    absl::StatusOr<CaptureRecord> now = store_.GetCapture(id);
    // Deleted while it was read: what was read may be part of it.
    if (!now.ok() && now.status().code() == absl::StatusCode::kNotFound) {
      return http::HttpResponse::Problem(
          404, "Not Found", common::StrCat("capture ", id, " was deleted while analysed"));
    }
    // A capture deleted and made again under the same id starts its generations again.
    if (now.ok() && now->generation == record.generation && now->created_ns == record.created_ns &&
        body.size() <= cache_.max_bytes() && store_.PutAnalysis(id, cache_key, body).ok()) {
      now->stored_bytes += body.size();
      (void)store_.PutCapture(*now);
      if (absl::Status s = DropCached(cache_.Insert(id, cache_key, body.size())); !s.ok()) {
        spdlog::warn("analysis cache: {}", s);
      }
    }
  }
  http::HttpResponse response = http::HttpResponse::Json(200, std::move(body));
  if (table) response.content_type = "text/plain; charset=utf-8";
  return response;
}

// A capture's trace, streamed from the store one worker at a time at the client's pace (produced
// on the server's stream threads a piece at a time, never held whole): the merged Chrome JSON,
// Perfetto's protobuf (format=perfetto), or one rank as Kineto writes it (format=kineto, for HTA
// and the PyTorch profiler's viewer: one request per rank).
http::HttpResponse RestApi::Trace(http::HttpRequest& r) {
  const std::string id = r.params["id"];
  const std::string gzip_text = r.Query("gzip", "false");
  if (gzip_text != "true" && gzip_text != "false" && gzip_text != "1" && gzip_text != "0") {
    return http::HttpResponse::Problem(400, "Bad Request", "gzip must be true, false, 1 or 0");
  }
  const bool compress = gzip_text == "1" || gzip_text == "true";
  const std::string format = r.Query("format", "json");
  if (format != "json" && format != "perfetto" && format != "kineto") {
    return http::HttpResponse::Problem(400, "Bad Request",
                                       "format must be json, perfetto or kineto");
  }
  for (const auto& [key, value] : r.query) {
    if (key != "gzip" && key != "ranks" && key != "steps" && key != "window" && key != "format") {
      return http::HttpResponse::Problem(400, "Bad Request",
                                         common::StrCat("unknown query parameter \"", key, "\""));
    }
  }
  // The filters of `podscope export`: checked before the 200, applied while streaming.
  const common::CaptureFilterSpec spec{r.Query("ranks"), r.Query("steps"), r.Query("window")};
  absl::StatusOr<common::EventFilter> filter = common::EventFilter::Parse(spec);
  if (!filter.ok()) return FromStatus(filter.status());
  if (format == "kineto" && filter->ranks().size() != 1) {
    return http::HttpResponse::Problem(
        400, "Bad Request",
        "format=kineto is one rank's trace, as Kineto writes one file per rank: give ranks=N");
  }
  absl::StatusOr<CaptureRecord> record = store_.GetCapture(id);
  if (!record.ok()) return FromStatus(record.status());
  if (std::optional<http::HttpResponse> refused = NotAnalysable(*record))
    return *std::move(refused);
  if (!filter->ranks().empty()) {
    // A rank whose worker failed before it sent anything (a conflict, a lost agent) has no
    // events to export.
    const bool any = std::any_of(
        record->workers.begin(), record->workers.end(),
        [&](const storage::WorkerRecord& w) { return filter->KeepsRank(w.rank) && w.events > 0; });
    if (!any)
      return http::HttpResponse::Problem(
          404, "Not Found",
          common::StrCat("capture ", id, " holds no events of ranks ", spec.ranks));
  }
  http::HttpResponse response = http::HttpResponse::Json(200, "");
  std::string filename = id;
  if (format == "perfetto") {
    response.content_type = "application/octet-stream";
    filename += ".perfetto-trace";
  } else {
    if (format == "kineto") common::StrAppend(&filename, "-rank-", filter->ranks()[0], ".pt.trace");
    filename += ".json";
  }
  if (compress) {
    response.content_type = "application/gzip";
    filename += ".gz";
  }
  response.headers.emplace_back("Content-Disposition",
                                common::StrCat("attachment; filename=\"", filename, "\""));
  response.stream = [this, id, format, compress, window_start_ns = record->window_start_ns,
                     filter = *std::move(filter)](const http::BodyWriter& write) -> absl::Status {
    // One worker at a time from the store: the export never holds the capture.
    absl::StatusOr<storage::StoredWorkers> stored = storage::StoredWorkers::Open(store_, id);
    if (!stored.ok()) return stored.status();
    stored->KeepRanks(filter.ranks());
    common::FilteredWorkers workers(*stored, filter);
    std::optional<common::GzipStreamWriter> gz;
    if (compress) gz.emplace(write);
    uint64_t total = 0;
    auto sink = [&](std::string_view piece) -> absl::Status {
      total += piece.size();
      if (limits_.max_export_bytes > 0 && total > limits_.max_export_bytes) {
        return absl::ResourceExhaustedError(common::StrCat(
            "the trace is larger than the export limit of ", limits_.max_export_bytes, " bytes"));
      }
      return gz ? gz->Write(piece) : write(piece);
    };
    common::ExportOptions options;
    if (format == "kineto") options.layout = common::ExportLayout::kKineto;
    options.window_start_ns = window_start_ns;
    absl::StatusOr<common::ExportStats> stats =
        format == "perfetto" ? common::WritePerfettoTrace(workers, options, sink)
                             : common::WriteChromeTrace(workers, options, sink);
    if (!stats.ok()) {
      spdlog::warn("export of capture {} cut short: {}", id, stats.status());
      return stats.status();
    }
    return gz ? gz->Finish() : absl::OkStatus();
  };
  return response;
}

}  // namespace podscope::coordinator
