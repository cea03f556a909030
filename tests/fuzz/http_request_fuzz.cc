// Fuzz target for the REST request path: raw bytes parsed as an HTTP/1.1 request (Beast, with the
// server's header and body bounds), the target percent-decoded and split into query pairs,
// routed over the API's route patterns, and the parts a handler checks first: JSON bodies
// (duplicate keys), step patterns, job names, chunked bodies. Never a crash or a hang.
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cmath>
#include <string>

#include "common/json_keys.h"
#include "common/parse_number.h"
#include "common/step_pattern.h"
#include "http/http_types.h"
#include "storage/trace_store.h"
#include "tests/fuzz/fuzz_seeds.h"

namespace {

namespace beast = boost::beast;
namespace beast_http = beast::http;

const podscope::http::Router& ApiRoutes() {
  static const podscope::http::Router* router = [] {
    auto* r = new podscope::http::Router();
    for (const auto& [method, pattern] :
         std::vector<std::pair<const char*, const char*>>{{"GET", "/healthz"},
                                                          {"GET", "/readyz"},
                                                          {"GET", "/metrics"},
                                                          {"GET", "/v1/openapi.json"},
                                                          {"GET", "/v1/captures"},
                                                          {"POST", "/v1/captures:import"},
                                                          {"GET", "/v1/captures/{id}"},
                                                          {"DELETE", "/v1/captures/{id}"},
                                                          {"GET", "/v1/captures/{id}/trace"},
                                                          {"GET", "/v1/captures/{id}/{report}"},
                                                          {"GET", "/v1/workers"},
                                                          {"POST", "/v1/captures"},
                                                          {"POST", "/v1/captures/{id}:cancel"}}) {
      r->Add({method, pattern, [](podscope::http::HttpRequest&) {
                return podscope::http::HttpResponse::Json(200, "{}");
              }});
    }
    return r;
  }();
  return *router;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  beast_http::request_parser<beast_http::string_body> parser;
  parser.header_limit(16 << 10);
  parser.body_limit(1 << 20);
  parser.eager(true);
  beast::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (ec || !parser.is_header_done()) return 0;
  const auto& message = parser.get();
  podscope::http::HttpRequest request;
  request.method = std::string(message.method_string());
  const std::string_view target(message.target().data(), message.target().size());
  const size_t q = target.find('?');
  if (!podscope::http::PercentDecode(target.substr(0, q), &request.path)) return 0;
  if (q != std::string_view::npos &&
      !podscope::http::ParseQuery(target.substr(q + 1), &request.query))
    return 0;
  bool path_known = false;
  const podscope::http::Route* route =
      ApiRoutes().Match(request.method, request.path, &request.params, &path_known);
  if (route != nullptr && !path_known) __builtin_trap();
  for (const auto& [key, value] : request.query) {
    if (key == "step_pattern") {
      absl::StatusOr<podscope::common::StepPattern> pattern =
          podscope::common::StepPattern::Compile(value);
      if (pattern.ok()) (void)pattern->Find(request.path);
    } else if (key == "job") {
      (void)podscope::storage::ValidateJobName(value);
    } else if (key == "link_gbytes_per_s") {
      absl::StatusOr<double> v = podscope::common::ParseDouble(value);
      if (v.ok() && !std::isfinite(*v)) __builtin_trap();
    } else if (key == "limit" || key == "rank") {
      (void)podscope::common::ParseInt(value);
    }
  }
  if (parser.is_done()) {
    (void)podscope::common::CheckUniqueJsonKeys(message.body(), 8);
    std::string dechunked;
    (void)podscope::http::DecodeChunkedBody(message.body(), &dechunked);
  }
  return 0;
}

namespace podscope::fuzz {

std::vector<std::string> Seeds(const std::vector<std::string>&) {
  return {
      "GET "
      "/v1/captures/cap-1/"
      "steps?window=hta&step_pattern=%5E(ProfilerStep%23)(%5Cd%2B)%24&link_gbytes_per_s=400 "
      "HTTP/1.1\r\n"
      "Host: x\r\n\r\n",
      "POST /v1/captures HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
      "56\r\n\r\n"
      "{\"job\": \"llm\", \"duration_ms\": 2000, \"ranks\": [0, 5, 7]}",
      "POST /v1/captures:import?job=llm&capture=c1&rank=3&name=r.json HTTP/1.1\r\nHost: x\r\n"
      "Content-Type: application/json\r\nTransfer-Encoding: "
      "chunked\r\n\r\n5\r\n{\"tra\r\n0\r\n\r\n",
      "DELETE /v1/captures/c1 HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /v1/workers?limit=2&after=agent-7&job=llm HTTP/1.1\r\nHost: x\r\n\r\n",
      "POST /v1/captures/cap-9:cancel?reason=enough HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\n"
      "Content-Length: 0\r\n\r\n",
  };
}

}  // namespace podscope::fuzz
