#include "coordinator/auth/token_authorizer.h"

#include "common/str_util.h"

namespace podscope::coordinator {
namespace {

bool StartsWithNoCase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(text[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

http::HttpResponse Unauthorized(std::string_view detail, bool invalid_token) {
  http::HttpResponse r = http::HttpResponse::Problem(401, "Unauthorized", detail);
  r.headers.emplace_back("WWW-Authenticate",
                         invalid_token ? "Bearer realm=\"podscope\", error=\"invalid_token\""
                                       : "Bearer realm=\"podscope\"");
  return r;
}

}  // namespace

TokenAuthorizer::TokenAuthorizer(TokenStore store)
    : store_(std::make_shared<const TokenStore>(std::move(store))) {}

void TokenAuthorizer::Replace(TokenStore store) {
  auto fresh = std::make_shared<const TokenStore>(std::move(store));
  absl::MutexLock lock(&mu_);
  store_ = std::move(fresh);
}

std::optional<http::HttpResponse> TokenAuthorizer::Check(http::HttpRequest& request,
                                                         http::Access access) {
  if (access == http::Access::kOpen) return std::nullopt;
  const std::string header = request.Header("authorization");
  if (header.empty()) {
    ++missing_;
    log_.Warn("auth: {} {} {}: no token", request.peer, request.method, request.path);
    return Unauthorized(
        common::StrCat(request.method, " ", request.path,
                       " needs a bearer token (podscope --token-file FILE, or PODSCOPE_TOKEN)"),
        false);
  }
  const std::string_view token = common::StripWhitespace(
      std::string_view(header).substr(StartsWithNoCase(header, "bearer ") ? 7 : header.size()));
  std::shared_ptr<const TokenStore> store;
  {
    absl::MutexLock lock(&mu_);
    store = store_;
  }
  const std::optional<TokenIdentity> who = token.empty() ? std::nullopt : store->Find(token);
  if (!who) {
    ++invalid_;
    log_.Warn("auth: {} {} {}: {}", request.peer, request.method, request.path,
              token.empty() ? "an Authorization header that is not \"Bearer TOKEN\""
                            : "a token nobody holds");
    return Unauthorized("the bearer token is not valid", true);
  }
  if (static_cast<int>(who->role) < static_cast<int>(access)) {
    ++forbidden_;
    log_.Warn("auth: {} {} {}: token \"{}\" has role {}, the route needs {}", request.peer,
              request.method, request.path, who->name, http::AccessName(who->role),
              http::AccessName(access));
    return http::HttpResponse::Problem(
        403, "Forbidden",
        common::StrCat("token \"", who->name, "\" has role ", http::AccessName(who->role), "; ",
                       request.method, " ", request.path, " needs role ",
                       http::AccessName(access)));
  }
  request.principal = who->name;
  return std::nullopt;
}

void TokenAuthorizer::AppendMetrics(std::string* out) const {
  size_t tokens = 0;
  {
    absl::MutexLock lock(&mu_);
    tokens = store_->size();
  }
  common::StrAppend(
      out, "# HELP podscope_auth_failures_total REST requests refused for their credentials.\n",
      "# TYPE podscope_auth_failures_total counter\n",
      "podscope_auth_failures_total{reason=\"missing_token\"} ", missing_.load(), "\n",
      "podscope_auth_failures_total{reason=\"invalid_token\"} ", invalid_.load(), "\n",
      "podscope_auth_failures_total{reason=\"forbidden\"} ", forbidden_.load(), "\n",
      "# HELP podscope_auth_tokens Bearer tokens loaded from the token file.\n",
      "# TYPE podscope_auth_tokens gauge\n", "podscope_auth_tokens ", tokens, "\n");
}

}  // namespace podscope::coordinator
