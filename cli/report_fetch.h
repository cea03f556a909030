// Asking the coordinator for a report that may take a while: a report of a dense capture is
// computed while the request waits, so the wait is bounded by the caller's give-up time rather
// than the client's usual minute without progress, and a 503 with Retry-After (the analyses'
// memory or queue is full, or the coordinator is stopping) is asked again after the time it
// names. A coordinator that is gone by then is the client's error.
#pragma once

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "http/http_client.h"

namespace podscope::cli {

// GET `target`: the first answer that is not a 503 with Retry-After, or the last one once
// `give_up` has passed. Errors are the client's (unreachable, timed out at `give_up`).
absl::StatusOr<http::HttpClientResponse> FetchReport(http::ServerAddress server,
                                                     const std::string& target,
                                                     std::chrono::steady_clock::time_point give_up);

}  // namespace podscope::cli
