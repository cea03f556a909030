#include "coordinator/api/live_api.h"

#include <algorithm>
#include <boost/json.hpp>

#include "common/json_keys.h"
#include "common/json_writer.h"
#include "common/parse_number.h"
#include "common/str_util.h"
#include "coordinator/api/capture_json.h"
#include "coordinator/api/status_response.h"

namespace podscope::coordinator {

namespace {

http::HttpResponse BadRequest(std::string_view detail) {
  return http::HttpResponse::Problem(400, "Bad Request", detail);
}

// A JSON number that must be a non-negative integer (ints and integral doubles accepted).
bool NonNegativeInteger(const boost::json::value& v, int64_t* out) {
  if (v.is_int64())
    *out = v.as_int64();
  else if (v.is_uint64() && v.as_uint64() <= static_cast<uint64_t>(INT64_MAX))
    *out = static_cast<int64_t>(v.as_uint64());
  else if (v.is_double() && v.as_double() >= 0 && v.as_double() < 9e18 &&
           v.as_double() == static_cast<double>(static_cast<int64_t>(v.as_double())))
    *out = static_cast<int64_t>(v.as_double());
  else
    return false;
  return *out >= 0;
}

}  // namespace

void LiveApi::Register(http::Router& router) {
  auto bind = [this](http::HttpResponse (LiveApi::*method)(http::HttpRequest&)) {
    return [this, method](http::HttpRequest& r) { return (this->*method)(r); };
  };
  router.Add({.method = "GET",
              .pattern = "/v1/workers",
              .handler = bind(&LiveApi::ListWorkers),
              .access = http::Access::kRead});
  router.Add({.method = "POST",
              .pattern = "/v1/captures",
              .handler = bind(&LiveApi::StartCapture),
              .access = http::Access::kCapture});
  router.Add({.method = "POST",
              .pattern = "/v1/captures/{id}:cancel",
              .handler = bind(&LiveApi::CancelCapture),
              .access = http::Access::kCapture});
}

namespace {

// One agent of GET /v1/workers: who and where it is, its health, and its clock model (null
// before its first sync).
void WriteAgent(const AgentSnapshot& a, const ClockAligner& aligner, TimeNs now,
                common::JsonWriter& w) {
  w.BeginObject().Key("agent_id").String(a.agent_id).Key("host").String(a.host);
  w.Key("version").String(a.version).Key("peer").String(a.peer);
  w.Key("health").String(AgentHealthName(a.health));
  w.Key("last_seen_ms_ago").Int((now - a.last_seen_ns) / 1'000'000);
  w.Key("workers").Uint(a.workers.size()).Key("clock");
  absl::StatusOr<common::ClockModel> model = aligner.Model(a.agent_id);
  if (model.ok()) {
    w.BeginObject().Key("offset_ns").Int(model->offset_ns).Key("drift_ppb").Int(model->drift_ppb);
    w.Key("error_bound_ns").Int(model->error_bound_ns);
    w.Key("samples").Uint(aligner.SampleCount(a.agent_id)).EndObject();
  } else {
    w.Null();
  }
  w.EndObject();
}

// One worker of GET /v1/workers, with the agent that serves it.
void WriteWorker(const v1::WorkerDescriptor& d, const AgentSnapshot& a, common::JsonWriter& w) {
  w.BeginObject().Key("job").String(d.job()).Key("rank").Int(d.rank());
  w.Key("local_rank").Int(d.local_rank()).Key("world_size").Int(d.world_size());
  w.Key("pid").Int(d.pid()).Key("host").String(d.host()).Key("device").String(d.device());
  w.Key("collector").String(d.collector()).Key("agent_id").String(a.agent_id);
  w.Key("health").String(AgentHealthName(a.health)).EndObject();
}

}  // namespace

// GET /v1/workers[?job=J][&limit=N][&after=AGENT]: agents (by id) with health and clock, and
// their workers, a page at a time. A page holds whole agents, up to `limit` workers (an agent
// without workers counts as one); `next` is the cursor of the following page.
http::HttpResponse LiveApi::ListWorkers(http::HttpRequest& r) {
  const std::string job = r.Query("job");
  const std::string after = r.Query("after");
  size_t limit = 1000;
  if (r.query.count("limit")) {
    absl::StatusOr<int64_t> n = common::ParseInt(r.Query("limit"));
    if (!n.ok() || *n < 1 || *n > 10000) return BadRequest("limit must be an integer in 1..10000");
    limit = static_cast<size_t>(*n);
  }
  const TimeNs now = time_.Now();
  std::vector<AgentSnapshot> agents = registry_.Snapshot();
  auto serves = [&job](const v1::WorkerDescriptor& d) { return job.empty() || d.job() == job; };
  // With a job, only the agents serving it (an agent without workers serves no job).
  if (!job.empty()) {
    std::erase_if(agents, [&](const AgentSnapshot& a) {
      return std::none_of(a.workers.begin(), a.workers.end(), serves);
    });
  }
  size_t connected = 0, disconnected = 0, connected_workers = 0;
  for (const AgentSnapshot& a : agents) {
    (a.connected ? connected : disconnected) += 1;
    if (a.connected)
      connected_workers +=
          static_cast<size_t>(std::count_if(a.workers.begin(), a.workers.end(), serves));
  }
  // This page: agents after the cursor, whole, while their workers fit.
  std::vector<const AgentSnapshot*> page;
  size_t page_workers = 0, cost = 0;
  std::string next;
  for (const AgentSnapshot& a : agents) {
    if (!after.empty() && a.agent_id <= after) continue;
    const size_t mine =
        static_cast<size_t>(std::count_if(a.workers.begin(), a.workers.end(), serves));
    if (!page.empty() && cost + std::max<size_t>(mine, 1) > limit) {
      next = page.back()->agent_id;
      break;
    }
    page.push_back(&a);
    page_workers += mine;
    cost += std::max<size_t>(mine, 1);
  }
  common::JsonWriter w;
  w.BeginObject().Key("agents").BeginArray();
  for (const AgentSnapshot* a : page) WriteAgent(*a, aligner_, now, w);
  w.EndArray().Key("workers").BeginArray();
  for (const AgentSnapshot* a : page) {
    for (const v1::WorkerDescriptor& d : a->workers) {
      if (serves(d)) WriteWorker(d, *a, w);
    }
  }
  // Totals over every page: connected agents and their workers; disconnected agents are listed
  // (health "disconnected") until forgotten, never counted.
  w.EndArray().Key("connected_agents").Uint(connected);
  w.Key("disconnected_agents").Uint(disconnected).Key("connected_workers").Uint(connected_workers);
  w.Key("worker_count").Uint(page_workers);
  if (!next.empty()) w.Key("next").String(next);
  w.EndObject().EndLine();
  return http::HttpResponse::Json(200, std::move(w.buffer()));
}

// POST /v1/captures {"job", "ranks"?, "duration_ms", "delay_ms"?, "limits"?: {...}} -> 202.
http::HttpResponse LiveApi::StartCapture(http::HttpRequest& r) {
  if (absl::Status s = common::CheckUniqueJsonKeys(r.body, 8); !s.ok()) {
    return BadRequest(common::StrCat("the body must be a JSON object: ", s.message()));
  }
  boost::system::error_code ec;
  boost::json::parse_options options;
  options.max_depth = 8;
  boost::json::value body = boost::json::parse(r.body, ec, {}, options);
  if (ec || !body.is_object()) {
    return BadRequest(
        common::StrCat("the body must be a JSON object", ec ? " (" + ec.message() + ")" : ""));
  }
  CaptureSpec spec;
  for (const auto& [key, value] : body.as_object()) {
    int64_t n = 0;
    if (key == "job") {
      if (!value.is_string()) return BadRequest("job must be a string");
      spec.job = std::string(value.as_string());
    } else if (key == "duration_ms" || key == "delay_ms") {
      if (!NonNegativeInteger(value, &n) || n > 86'400'000)
        return BadRequest(
            common::StrCat(std::string(key), " must be an integer number of milliseconds"));
      (key == "duration_ms" ? spec.duration_ns : spec.delay_ns) = n * 1'000'000;
    } else if (key == "ranks") {
      if (!value.is_array()) return BadRequest("ranks must be an array of integers");
      for (const boost::json::value& v : value.as_array()) {
        if (!NonNegativeInteger(v, &n) || n > INT32_MAX)
          return BadRequest("ranks must be an array of non-negative integers");
        spec.ranks.push_back(static_cast<int32_t>(n));
      }
    } else if (key == "limits") {
      if (!value.is_object()) return BadRequest("limits must be an object");
      for (const auto& [lkey, lvalue] : value.as_object()) {
        if (!NonNegativeInteger(lvalue, &n))
          return BadRequest(
              common::StrCat("limits.", std::string(lkey), " must be a non-negative integer"));
        if (lkey == "max_events_per_worker")
          spec.max_events_per_worker = static_cast<uint64_t>(n);
        else if (lkey == "max_upload_bytes")
          spec.max_upload_bytes = static_cast<uint64_t>(n);
        else
          return BadRequest(common::StrCat("unknown limit \"", std::string(lkey),
                                           "\" (known: max_events_per_worker, max_upload_bytes)"));
      }
    } else {
      return BadRequest(common::StrCat("unknown field \"", std::string(key),
                                       "\" (known: job, ranks, duration_ms, delay_ms, limits)"));
    }
  }
  if (spec.job.empty()) return BadRequest("job is required");
  if (absl::Status s = storage::ValidateJobName(spec.job); !s.ok())
    return BadRequest(std::string(s.message()));
  if (spec.duration_ns == 0) return BadRequest("duration_ms is required and must be positive");
  absl::StatusOr<storage::CaptureRecord> record = scheduler_.StartCapture(spec);
  if (!record.ok()) {
    if (record.status().code() == absl::StatusCode::kResourceExhausted) {
      return http::HttpResponse::Problem(429, "Too Many Requests",
                                         std::string(record.status().message()));
    }
    return FromStatus(record.status());
  }
  common::JsonWriter w;
  WriteCaptureJson(w, *record);
  w.EndLine();
  http::HttpResponse response = http::HttpResponse::Json(202, std::move(w.buffer()));
  response.headers.emplace_back("Location", common::StrCat("/v1/captures/", record->id));
  return response;
}

// POST /v1/captures/{id}:cancel[?reason=...]
http::HttpResponse LiveApi::CancelCapture(http::HttpRequest& r) {
  std::string reason = r.Query("reason", "cancelled through the REST API");
  if (reason.size() > 1024) return BadRequest("reason is too long");
  if (absl::Status s = scheduler_.Cancel(r.params["id"], reason); !s.ok()) return FromStatus(s);
  http::HttpResponse response = http::HttpResponse::Json(
      202, common::StrCat("{\"id\":\"", r.params["id"], "\",\"state\":\"cancelled\"}\n"));
  return response;
}

}  // namespace podscope::coordinator
