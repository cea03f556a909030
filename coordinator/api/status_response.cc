#include "coordinator/api/status_response.h"

#include <string>

namespace podscope::coordinator {

http::HttpResponse FromStatus(const absl::Status& s) {
  const std::string detail(s.message());
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      return http::HttpResponse::Problem(404, "Not Found", detail);
    case absl::StatusCode::kInvalidArgument:
      return http::HttpResponse::Problem(400, "Bad Request", detail);
    case absl::StatusCode::kResourceExhausted:
      return http::HttpResponse::Problem(413, "Payload Too Large", detail);
    case absl::StatusCode::kFailedPrecondition:
      return http::HttpResponse::Problem(409, "Conflict", detail);
    case absl::StatusCode::kUnavailable:
      return http::HttpResponse::Problem(503, "Service Unavailable", detail);
    default:
      return http::HttpResponse::Problem(500, "Internal Server Error", detail);
  }
}

}  // namespace podscope::coordinator
