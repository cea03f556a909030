#include "cli/report_fetch.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "common/parse_number.h"

namespace podscope::cli {

absl::StatusOr<http::HttpClientResponse> FetchReport(
    http::ServerAddress server, const std::string& target,
    std::chrono::steady_clock::time_point give_up) {
  using std::chrono::duration_cast;
  using std::chrono::seconds;
  while (true) {
    const auto left = duration_cast<seconds>(give_up - std::chrono::steady_clock::now());
    // The server sends nothing while it computes: that silence may last until the give-up time.
    server.timeout_seconds = static_cast<int>(std::clamp<int64_t>(left.count(), 1, 86'400));
    absl::StatusOr<http::HttpClientResponse> r = http::HttpRequestTo(server, "GET", target);
    if (!r.ok() || r->status != 503) return r;
    auto after = r->headers.find("retry-after");
    if (after == r->headers.end()) return r;
    const absl::StatusOr<int64_t> wait = common::ParseInt(after->second);
    if (!wait.ok() || *wait < 0 || *wait > 3600 ||
        std::chrono::steady_clock::now() + seconds(*wait) >= give_up) {
      return r;
    }
    const int64_t wait_s = *wait;
    std::fprintf(stderr, "the coordinator is busy (%s); asking again in %lld s\n",
                 http::ProblemDetail(*r).c_str(), static_cast<long long>(wait_s));
    std::this_thread::sleep_for(seconds(std::max<int64_t>(wait_s, 1)));
  }
}

}  // namespace podscope::cli
