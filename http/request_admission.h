// What the HTTP server does with a request once its header has arrived and before any of its
// body is read: which route runs it, or which answer refuses it, and how its body is read.
// Pure (no sockets, no Beast): the session calls it with what the header said.
//
// Checks, in this order, each answering in place of the handler:
//   400  the target's percent-encoding or query is malformed
//   404  no route has this path; 405: one has, not for this method
//   401/403  the authorizer's refusal (before anything about the body is said)
//   415  a POST that is not a streamed upload and not application/json (a cross-site form can
//        only send form or text types, so this keeps web pages from driving the API)
//   413  a declared Content-Length over the route's bound (uploads: max_upload_bytes, other
//        bodies: max_body_bytes), refused before a byte of the body is read
// A refused request's body is never read: the connection closes after the answer.
#pragma once

#include <cstdint>
#include <optional>

#include "http/http_server.h"
#include "http/http_types.h"

namespace podscope::http {

struct Admission {
  enum class Body {
    kNone,    // the request has no body
    kString,  // read into HttpRequest::body, within max_body_bytes
    kFile,    // streamed to a file under upload_dir, within max_upload_bytes
  };
  // The route to run; nullptr when `refusal` answers instead.
  const Route* route = nullptr;
  HttpResponse refusal;
  Body body = Body::kNone;
  // The request proved who sent it: a token the authorizer took, on a route that needs one (or
  // any routed request, where there is no authorizer). Its connection leaves the
  // unauthenticated share.
  bool authenticated = false;
};

// What the request's header said about its body.
struct DeclaredBody {
  std::optional<uint64_t> content_length;
  bool chunked = false;
};

// Fills request->params from the matched route. `target_ok` is false when the target did not
// decode (percent-encoding or query). `authorizer` may be null (every route open).
Admission AdmitRequest(const Router& router, Authorizer* authorizer, const HttpLimits& limits,
                       bool target_ok, DeclaredBody declared, HttpRequest* request);

// "application/json", whatever its case and parameters ("; charset=utf-8").
bool IsJsonMediaType(std::string_view content_type);

}  // namespace podscope::http
