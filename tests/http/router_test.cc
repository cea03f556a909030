#include <gtest/gtest.h>

#include "http/http_types.h"

namespace podscope::http {
namespace {

TEST(RouterTest, VerbSegmentsMatchOnlyTheirVerb) {
  Router router;
  router.Add({"GET", "/v1/captures/{id}", nullptr});
  router.Add({"POST", "/v1/captures/{id}:cancel", nullptr});
  std::map<std::string, std::string> params;
  bool path_matched = false;
  const Route* cancel = router.Match("POST", "/v1/captures/cap-1:cancel", &params, &path_matched);
  ASSERT_NE(cancel, nullptr);
  EXPECT_EQ(cancel->pattern, "/v1/captures/{id}:cancel");
  EXPECT_EQ(params["id"], "cap-1");
  // "{id}" never swallows a verb, and a verb needs an id before it.
  EXPECT_EQ(router.Match("GET", "/v1/captures/cap-1:cancel", &params, &path_matched), nullptr);
  EXPECT_EQ(router.Match("POST", "/v1/captures/:cancel", &params, &path_matched), nullptr);
  EXPECT_EQ(router.Match("POST", "/v1/captures/a:b:cancel", &params, &path_matched), nullptr);
  EXPECT_EQ(router.Match("POST", "/v1/captures/cap-1:stop", &params, &path_matched), nullptr);
  const Route* get = router.Match("GET", "/v1/captures/cap-1", &params, &path_matched);
  ASSERT_NE(get, nullptr);
  EXPECT_EQ(params["id"], "cap-1");
}

}  // namespace
}  // namespace podscope::http
