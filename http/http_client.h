// A small blocking HTTP/1.1 client (http:// or https://, with a bearer token when one is given):
// the CLI's online mode, and the coordinator's alert notifications.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace podscope::common {
class Cancellation;
}

namespace podscope::http {

struct HttpClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  // Reading stopped at ServerAddress::max_response_bytes: the body is not the whole answer.
  bool truncated = false;
};

// "http[s]://host:port[/base]" -> host, port; and how to talk to it.
struct ServerAddress {
  std::string host;
  uint16_t port = 80;
  bool tls = false;  // https://
  std::string
      ca_file;  // --ca-cert: the CA the server's certificate must chain to (empty: the system's)
  std::string token;         // --token-file or PODSCOPE_TOKEN: sent as "Authorization: Bearer"
  int timeout_seconds = 60;  // connecting, and each read or write without progress
  // The whole exchange (connect, TLS, request, answer) however slowly the server trickles:
  // DeadlineExceeded past it. 0: no bound but timeout_seconds.
  int deadline_ms = 0;
  // Raised by another thread to end the exchange at once (Cancelled); outlives the call.
  const common::Cancellation* cancel = nullptr;
  size_t max_response_bytes = SIZE_MAX;  // the rest of a longer response is not read
  std::string user_agent = "podscope-cli";
  std::string base_path;                                     // "/base" of the URL, "" without one
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every request
  // When set, a 200's body is handed to it as it arrives (de-chunked) instead of being kept in
  // the response: a download of any size holds one read's worth. Its error ends the exchange.
  std::function<absl::Status(std::string_view)> body_sink;
  // Follow 307 and 308 redirects (a sharded coordinator sends a job's calls to its owner), at
  // most 3, re-sending the method, body and token; never from https to http.
  bool follow_redirects = false;
};
absl::StatusOr<ServerAddress> ParseServerUrl(const std::string& url);

// One request per connection. `progress` (optional) is told how many body bytes were sent.
// Errors: unreachable server, timeouts (timeout_seconds without progress, or deadline_ms: both
// DeadlineExceeded), cancellation (Cancelled), malformed responses.
absl::StatusOr<HttpClientResponse> HttpRequestTo(
    const ServerAddress& server, const std::string& method, const std::string& target,
    const std::string& body = "", const std::string& content_type = "",
    const std::function<void(uint64_t)>& progress = {});

// "HTTP 404: <the problem's detail>" from a problem+json answer, else the status and the
// start of the body.
std::string ProblemDetail(const HttpClientResponse& response);

// Percent-encodes a query value.
std::string UrlEncode(const std::string& value);

}  // namespace podscope::http
