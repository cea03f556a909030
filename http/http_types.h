// Requests, responses and routing for the shared HTTP server (the coordinator's REST API and
// UI, the agent's health endpoint). No Beast types here: route handlers are plain functions,
// testable without a socket.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace podscope::http {

// Hands one piece of a streamed body to the client. Blocks while the client is behind (at most
// a few pieces wait per connection) and fails once the client is gone: the producer stops then.
using BodyWriter = std::function<absl::Status(std::string_view piece)>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string, percent-decoded
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // small bodies
  std::string body_file;  // streamed uploads: a temporary file the handler may consume
  std::map<std::string, std::string> params;  // from {name} segments of the route
  std::string peer;                           // the client's address, "IP:port", for logs
  // Who the authorizer took the request from (a token's name); empty on open routes, or with
  // no authorizer.
  std::string principal;
  // For handlers on the heavy pool: true once the client has closed its connection (it can no
  // longer read an answer), so that work nobody waits for can stop. Null elsewhere.
  std::function<bool()> client_gone;

  std::string Header(const std::string& name) const;
  std::string Query(const std::string& name, const std::string& fallback = "") const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // A body too large to hold in memory (an export): when set, `body` is ignored and this is
  // called once, on the server's stream threads, to produce the body piece by piece; it is sent
  // chunked. An error after the first piece cuts the response short (no last chunk).
  std::function<absl::Status(const BodyWriter& write)> stream;

  static HttpResponse Json(int status, std::string body);
  // RFC 9457 problem details: {"type", "title", "status", "detail"}.
  static HttpResponse Problem(int status, std::string_view title, std::string_view detail);
};

using HttpHandler = std::function<HttpResponse(HttpRequest&)>;

// Who may call a route. Roles nest: admin may do what capture may, capture what read may.
enum class Access {
  kOpen,     // anyone, even without a token (/healthz, /readyz)
  kRead,     // read captures, reports, traces, workers
  kCapture,  // start and cancel captures
  kAdmin,    // import, delete
};
std::string_view AccessName(Access access);

struct Route {
  std::string method;
  std::string pattern;  // "/v1/captures/{id}"; literal segments may hold ':' ("captures:import")
  HttpHandler handler;
  bool heavy = false;            // run on the analysis executor, not the I/O threads
  bool streamed_upload = false;  // stream the body to a temporary file
  // The most restrictive by default: a route someone forgets to classify is never open.
  Access access = Access::kAdmin;
  // Waits on other coordinators (a sharded replica's forwarded calls): run on the forwarding
  // pool, so that a slow or dead peer holds up neither the I/O threads nor the analyses.
  bool forwarded = false;
  // A forwarded route's answer when no other coordinator is needed for this request, given on
  // the I/O threads before anything is sent to the forwarding pool (nullopt: it needs a peer),
  // so that local answers never wait behind forwards. Only for light routes.
  std::function<std::optional<HttpResponse>(HttpRequest&)> local_answer;
};

// Decides whether a request may call a route, from its credentials (the Authorization
// header). Called on the I/O threads before the body is read; must be thread-safe and fast.
class Authorizer {
 public:
  virtual ~Authorizer() = default;
  // nullopt: allowed (a request that needed a token gets its holder in request.principal).
  // Otherwise the answer to send instead (401 or 403, problem+json).
  virtual std::optional<HttpResponse> Check(HttpRequest& request, Access access) = 0;
};

// Owns the routes; matched in registration order. Not thread-safe to modify after start.
class Router {
 public:
  void Add(Route route) { routes_.push_back(std::move(route)); }
  // Changes the access of (method, pattern); false when no such route is registered.
  bool SetAccess(std::string_view method, std::string_view pattern, Access access);
  // The route for (method, path) with its path parameters; nullptr when none matches.
  // `path_matched` tells a 405 (path known, method not) from a 404.
  const Route* Match(std::string_view method, std::string_view path,
                     std::map<std::string, std::string>* params, bool* path_matched) const;
  const std::vector<Route>& routes() const { return routes_; }
  // For wrapping handlers once registered (ShardRouter); not while serving.
  std::vector<Route>& mutable_routes() { return routes_; }

 private:
  std::vector<Route> routes_;
};

// Decodes a chunked transfer-encoded body (RFC 9112 §7.1; extensions and trailers ignored).
// False when it is malformed or cut short (no last chunk): a streamed response that failed.
bool DecodeChunkedBody(std::string_view chunked, std::string* out);

// Splits "a=1&b=x%20y" into decoded pairs; false on malformed percent escapes.
bool ParseQuery(std::string_view query, std::map<std::string, std::string>* out);
bool PercentDecode(std::string_view in, std::string* out);

}  // namespace podscope::http
