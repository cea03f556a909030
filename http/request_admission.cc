#include "http/request_admission.h"

#include <cctype>
#include <string>

#include "common/str_util.h"

namespace podscope::http {

bool IsJsonMediaType(std::string_view content_type) {
  std::string type(content_type.substr(0, content_type.find(';')));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return type == "application/json";
}

Admission AdmitRequest(const Router& router, Authorizer* authorizer, const HttpLimits& limits,
                       bool target_ok, DeclaredBody declared, HttpRequest* request) {
  Admission out;
  if (!target_ok) {
    out.refusal = HttpResponse::Problem(400, "Bad Request",
                                        "malformed percent-encoding in the request target");
    return out;
  }
  bool path_known = false;
  const Route* route = router.Match(request->method, request->path, &request->params, &path_known);
  if (route == nullptr) {
    out.refusal = path_known
                      ? HttpResponse::Problem(
                            405, "Method Not Allowed",
                            common::StrCat(request->method, " is not allowed on ", request->path))
                      : HttpResponse::Problem(404, "Not Found",
                                              common::StrCat("no route for ", request->path));
    return out;
  }
  if (authorizer != nullptr) {
    if (std::optional<HttpResponse> refusal = authorizer->Check(*request, route->access)) {
      out.refusal = std::move(*refusal);
      return out;
    }
  }
  out.authenticated = authorizer == nullptr || route->access != Access::kOpen;
  if (request->method == "POST" && !route->streamed_upload &&
      !IsJsonMediaType(request->Header("content-type"))) {
    out.refusal = HttpResponse::Problem(
        415, "Unsupported Media Type",
        common::StrCat("POST ", request->path, " takes Content-Type: application/json"));
    return out;
  }
  const uint64_t limit = route->streamed_upload ? limits.max_upload_bytes : limits.max_body_bytes;
  if (declared.content_length && *declared.content_length > limit) {
    out.refusal =
        HttpResponse::Problem(413, "Payload Too Large",
                              common::StrCat(route->streamed_upload ? "uploads" : "request bodies",
                                             " are limited to ", limit, " bytes"));
    return out;
  }
  out.route = route;
  if (route->streamed_upload) {
    out.body = Admission::Body::kFile;
  } else if (declared.content_length || declared.chunked) {
    out.body = Admission::Body::kString;
  }
  return out;
}

}  // namespace podscope::http
