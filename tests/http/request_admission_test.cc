#include "http/request_admission.h"

#include <gtest/gtest.h>

#include <string>

namespace podscope::http {
namespace {

// Refuses every request to a route that needs more than read access, and records what it saw.
class ReadOnlyAuthorizer : public Authorizer {
 public:
  std::optional<HttpResponse> Check(HttpRequest& request, Access access) override {
    ++checks;
    if (access == Access::kRead || access == Access::kOpen) return std::nullopt;
    return HttpResponse::Problem(403, "Forbidden", "read-only token");
  }
  int checks = 0;
};

class RequestAdmissionTest : public ::testing::Test {
 protected:
  RequestAdmissionTest() {
    Route get{"GET", "/v1/captures/{id}", nullptr};
    get.access = Access::kRead;
    router_.Add(get);
    Route start{"POST", "/v1/captures", nullptr};
    start.access = Access::kCapture;
    router_.Add(start);
    Route upload{"POST", "/v1/captures:import", nullptr};
    upload.streamed_upload = true;
    upload.access = Access::kRead;  // open to the test's authorizer, to reach the body checks
    router_.Add(upload);
    Route rules{"PUT", "/v1/alerts/rules", nullptr};
    rules.access = Access::kRead;
    router_.Add(rules);
    limits_.max_body_bytes = 1000;
    limits_.max_upload_bytes = 5000;
  }

  Admission Admit(const std::string& method, const std::string& path, DeclaredBody body = {},
                  const std::string& content_type = "", bool target_ok = true) {
    request_ = HttpRequest{};
    request_.method = method;
    request_.path = path;
    if (!content_type.empty()) request_.headers["content-type"] = content_type;
    return AdmitRequest(router_, authorizer_, limits_, target_ok, body, &request_);
  }

  Router router_;
  HttpLimits limits_;
  Authorizer* authorizer_ = nullptr;
  HttpRequest request_;
};

TEST_F(RequestAdmissionTest, ARoutedRequestRunsWithItsParametersAndHowItsBodyIsRead) {
  Admission get = Admit("GET", "/v1/captures/cap-7");
  ASSERT_NE(get.route, nullptr);
  EXPECT_EQ(get.route->pattern, "/v1/captures/{id}");
  EXPECT_EQ(request_.params["id"], "cap-7");
  EXPECT_EQ(get.body, Admission::Body::kNone);

  Admission put = Admit("PUT", "/v1/alerts/rules", {.content_length = 1000});
  ASSERT_NE(put.route, nullptr);
  EXPECT_EQ(put.body, Admission::Body::kString);  // exactly at the bound is allowed
  EXPECT_EQ(Admit("PUT", "/v1/alerts/rules", {.chunked = true}).body, Admission::Body::kString);

  // A streamed upload is staged in a file whatever it declares, up to its own bound.
  EXPECT_EQ(Admit("POST", "/v1/captures:import", {.content_length = 5000}).body,
            Admission::Body::kFile);
  EXPECT_EQ(Admit("POST", "/v1/captures:import").body, Admission::Body::kFile);
  // A JSON POST, with parameters and in any case.
  Admission post =
      Admit("POST", "/v1/captures", {.content_length = 10}, "Application/JSON; charset=utf-8");
  ASSERT_NE(post.route, nullptr);
  EXPECT_EQ(post.body, Admission::Body::kString);
}

TEST_F(RequestAdmissionTest, EachRefusalSaysWhy) {
  Admission bad = Admit("GET", "/v1/captures/x", {}, "", /*target_ok=*/false);
  EXPECT_EQ(bad.route, nullptr);
  EXPECT_EQ(bad.refusal.status, 400);
  EXPECT_NE(bad.refusal.body.find("malformed percent-encoding"), std::string::npos);

  Admission unknown = Admit("GET", "/v2/nothing");
  EXPECT_EQ(unknown.route, nullptr);
  EXPECT_EQ(unknown.refusal.status, 404);
  EXPECT_NE(unknown.refusal.body.find("no route for /v2/nothing"), std::string::npos);

  Admission wrong_method = Admit("DELETE", "/v1/captures/cap-7");
  EXPECT_EQ(wrong_method.route, nullptr);
  EXPECT_EQ(wrong_method.refusal.status, 405);
  EXPECT_NE(wrong_method.refusal.body.find("DELETE is not allowed on /v1/captures/cap-7"),
            std::string::npos);

  Admission form =
      Admit("POST", "/v1/captures", {.content_length = 10}, "application/x-www-form-urlencoded");
  EXPECT_EQ(form.route, nullptr);
  EXPECT_EQ(form.refusal.status, 415);
  EXPECT_NE(form.refusal.body.find("POST /v1/captures takes Content-Type: application/json"),
            std::string::npos);
  EXPECT_EQ(Admit("POST", "/v1/captures", {.content_length = 2}).refusal.status, 415);  // none
  EXPECT_EQ(Admit("POST", "/v1/captures", {}, "application/jsonp").refusal.status, 415);

  Admission big = Admit("PUT", "/v1/alerts/rules", {.content_length = 1001});
  EXPECT_EQ(big.route, nullptr);
  EXPECT_EQ(big.refusal.status, 413);
  EXPECT_NE(big.refusal.body.find("request bodies are limited to 1000 bytes"), std::string::npos);

  Admission big_upload = Admit("POST", "/v1/captures:import", {.content_length = 5001});
  EXPECT_EQ(big_upload.route, nullptr);
  EXPECT_EQ(big_upload.refusal.status, 413);
  EXPECT_NE(big_upload.refusal.body.find("uploads are limited to 5000 bytes"), std::string::npos);
}

TEST_F(RequestAdmissionTest, TheChecksComeInTheirOrder) {
  // A bad target is a 400 whatever its path, known or not.
  EXPECT_EQ(Admit("GET", "/v2/nothing", {}, "", /*target_ok=*/false).refusal.status, 400);
  EXPECT_EQ(Admit("POST", "/v1/captures", {.content_length = 1 << 30}, "text/plain",
                  /*target_ok=*/false)
                .refusal.status,
            400);
  // The type before the length: a form too long for the bound is told about its type.
  EXPECT_EQ(Admit("POST", "/v1/captures", {.content_length = 1 << 30}, "text/plain").refusal.status,
            415);
  // A method the path does not take is a 405 before anything about its body.
  EXPECT_EQ(Admit("DELETE", "/v1/captures/x", {.content_length = 1 << 30}).refusal.status, 405);
}

TEST_F(RequestAdmissionTest, TheAuthorizerIsAskedBeforeAnythingIsSaidAboutTheBody) {
  ReadOnlyAuthorizer authorizer;
  authorizer_ = &authorizer;
  // Wrong type and too long, but the caller may not start captures: that is all it learns.
  Admission refused = Admit("POST", "/v1/captures", {.content_length = 1 << 30}, "text/plain");
  EXPECT_EQ(refused.route, nullptr);
  EXPECT_EQ(refused.refusal.status, 403);
  EXPECT_EQ(authorizer.checks, 1);
  // Unknown paths and bad targets are answered before the authorizer is asked.
  EXPECT_EQ(Admit("GET", "/v2/nothing").refusal.status, 404);
  EXPECT_EQ(Admit("GET", "/v1/captures/x", {}, "", false).refusal.status, 400);
  EXPECT_EQ(authorizer.checks, 1);
  // Allowed: the body's checks follow.
  EXPECT_EQ(Admit("PUT", "/v1/alerts/rules", {.content_length = 1001}).refusal.status, 413);
  EXPECT_NE(Admit("GET", "/v1/captures/cap-1").route, nullptr);
  EXPECT_EQ(authorizer.checks, 3);
}

TEST_F(RequestAdmissionTest, OnlyATokenTheAuthorizerTookAuthenticatesTheConnection) {
  Route health{"GET", "/healthz", nullptr};
  health.access = Access::kOpen;
  router_.Add(health);
  // No authorizer (an open server): any routed request.
  EXPECT_TRUE(Admit("GET", "/healthz").authenticated);
  EXPECT_FALSE(Admit("GET", "/v2/nothing").authenticated);
  ReadOnlyAuthorizer authorizer;
  authorizer_ = &authorizer;
  // An open route needs no token, so it proves nothing; a refused token neither.
  EXPECT_FALSE(Admit("GET", "/healthz").authenticated);
  EXPECT_FALSE(Admit("POST", "/v1/captures", {}, "application/json").authenticated);
  EXPECT_FALSE(Admit("GET", "/v2/nothing").authenticated);
  // A taken token does, even when the request is refused for its body afterwards.
  EXPECT_TRUE(Admit("GET", "/v1/captures/cap-1").authenticated);
  EXPECT_TRUE(Admit("PUT", "/v1/alerts/rules", {.content_length = 1001}).authenticated);
}

TEST(IsJsonMediaTypeTest, TheTypeAloneCountsWhateverItsCaseAndParameters) {
  EXPECT_TRUE(IsJsonMediaType("application/json"));
  EXPECT_TRUE(IsJsonMediaType("APPLICATION/JSON"));
  EXPECT_TRUE(IsJsonMediaType("application/json; charset=utf-8"));
  EXPECT_TRUE(IsJsonMediaType("application/json ;charset=utf-8"));
  EXPECT_FALSE(IsJsonMediaType(""));
  EXPECT_FALSE(IsJsonMediaType("application/json-patch+json"));
  EXPECT_FALSE(IsJsonMediaType("text/json"));
  EXPECT_FALSE(IsJsonMediaType(" application/json"));
}

}  // namespace
}  // namespace podscope::http
