#include "coordinator/api/status_response.h"

#include <string>

namespace podscope::coordinator {

HttpResponse FromStatus(const absl::Status& s) {
  const std::string detail(s.message());
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      return HttpResponse::Problem(404, "Not Found", detail);
    case absl::StatusCode::kInvalidArgument:
      return HttpResponse::Problem(400, "Bad Request", detail);
    case absl::StatusCode::kResourceExhausted:
      return HttpResponse::Problem(413, "Payload Too Large", detail);
    case absl::StatusCode::kFailedPrecondition:
      return HttpResponse::Problem(409, "Conflict", detail);
    case absl::StatusCode::kUnavailable:
      return HttpResponse::Problem(503, "Service Unavailable", detail);
    default:
      return HttpResponse::Problem(500, "Internal Server Error", detail);
  }
}

}  // namespace podscope::coordinator
