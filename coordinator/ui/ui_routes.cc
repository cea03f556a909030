#include "coordinator/ui/ui_routes.h"

#include <string>

#include "common/str_util.h"
#include "coordinator/ui/ui_assets.h"

namespace podscope::coordinator {
namespace {

const UiAsset* FindAsset(std::string_view name) {
  for (const UiAsset& a : UiAssets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

http::HttpResponse Serve(const http::HttpRequest& request, std::string_view name) {
  const UiAsset* asset = FindAsset(name);
  if (asset == nullptr) {
    http::HttpResponse missing = http::HttpResponse::Problem(
        404, "Not Found", common::StrCat("the web UI has no file \"", name, "\""));
    missing.headers = UiSecurityHeaders();
    return missing;
  }
  http::HttpResponse response;
  response.headers = UiSecurityHeaders();
  // Revalidated on every load (a coordinator upgraded in place serves new files at once); an
  // unchanged file costs a 304 without a body.
  response.headers.emplace_back("Cache-Control", "no-cache");
  response.headers.emplace_back("ETag", std::string(asset->etag));
  if (request.Header("if-none-match") == asset->etag) {
    response.status = 304;
    response.content_type.clear();
    return response;
  }
  response.content_type = std::string(asset->content_type);
  response.body = std::string(asset->body);
  return response;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& UiSecurityHeaders() {
  static const std::vector<std::pair<std::string, std::string>> kHeaders = {
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
       "connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"},
  };
  return kHeaders;
}

void RegisterUi(http::Router& router) {
  router.Add({.method = "GET",
              .pattern = "/",
              .handler = [](http::HttpRequest& r) { return Serve(r, "index.html"); },
              .access = http::Access::kOpen});
  router.Add({.method = "GET",
              .pattern = "/ui/{file}",
              .handler = [](http::HttpRequest& r) { return Serve(r, r.params["file"]); },
              .access = http::Access::kOpen});
}

}  // namespace podscope::coordinator
