// The REST API's Authorizer: bearer tokens from the token file, checked against each route's
// role (docs/security.md). Failures answer 401 (no token, or one nobody holds) or 403 (a token
// whose role is too small), are counted for /metrics and logged, rate-limited, with the caller's
// address and the token's name, never the token.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/auth/token_store.h"
#include "http/http_types.h"
#include "http/rate_limited_log.h"

namespace podscope::coordinator {

// Thread-safe.
class TokenAuthorizer final : public http::Authorizer {
 public:
  explicit TokenAuthorizer(TokenStore store);

  std::optional<http::HttpResponse> Check(http::HttpRequest& request, http::Access access) override;
  // Replaces the tokens (SIGHUP); requests already checked keep their answer.
  void Replace(TokenStore store);
  // Prometheus text: podscope_auth_failures_total{reason} and the number of tokens.
  void AppendMetrics(std::string* out) const;

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const TokenStore> store_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> missing_{0}, invalid_{0}, forbidden_{0};
  http::RateLimitedLog log_{"auth"};
};

}  // namespace podscope::coordinator
