// Serves the web UI at / and /ui/{file}. The pages hold no
// data: they are open like /healthz, and every figure they show comes from the REST API with the
// user's bearer token, so the API's authentication applies unchanged. The answers carry a strict
// Content-Security-Policy (scripts and styles from this origin only, no inline code), so a
// trace's kernel or job name shown on a page can never run as script.
#pragma once

#include "http/http_types.h"

namespace podscope::coordinator {

// Adds GET / and GET /ui/{file} to `router`.
void RegisterUi(http::Router& router);

// The headers every UI answer carries (CSP, no sniffing, no framing, no referrer).
const std::vector<std::pair<std::string, std::string>>& UiSecurityHeaders();

}  // namespace podscope::coordinator
