// absl::Status -> an RFC 9457 problem response, one mapping for every REST handler.
#pragma once

#include "absl/status/status.h"
#include "http/http_types.h"

namespace podscope::coordinator {

http::HttpResponse FromStatus(const absl::Status& s);

}  // namespace podscope::coordinator
