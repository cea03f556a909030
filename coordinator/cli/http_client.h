// A small blocking HTTP/1.1 client for the CLI's online mode (plain http:// on TCP).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace podscope::coordinator {

struct HttpClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// "http://host:port[/base]" -> host, port.
struct ServerAddress {
  std::string host;
  uint16_t port = 80;
};
absl::StatusOr<ServerAddress> ParseServerUrl(const std::string& url);

// One request per connection. `progress` (optional) is told how many body bytes were sent.
// Errors: unreachable server, timeouts (60 s without progress), malformed responses.
absl::StatusOr<HttpClientResponse> HttpRequestTo(const ServerAddress& server, const std::string& method,
                                                 const std::string& target, const std::string& body = "",
                                                 const std::string& content_type = "",
                                                 const std::function<void(uint64_t)>& progress = {});

// "HTTP 404: <the problem's detail>" from a problem+json answer, else the status and the
// start of the body.
std::string ProblemDetail(const HttpClientResponse& response);

// Percent-encodes a query value.
std::string UrlEncode(const std::string& value);

}  // namespace podscope::coordinator
