// Regression tests for the defects an adversarial run against the real coordinator found
// (issue 12): each one crashed, stalled or corrupted the daemon before its fix.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/daemon.h"
#include "tests/test_paths.h"

namespace podscope::testing {
namespace {

std::string UrlEncode(const std::string& text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// A Kineto trace whose host spans have the given names, 5 us each, with a 2 us kernel inside each.
std::string HostSpanTrace(const std::vector<std::string>& names) {
  std::string json = R"({"traceEvents": [)";
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string ts = std::to_string(10 * (i + 1));
    if (i > 0) json += ",";
    json += R"({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "name": ")" + names[i] + R"(", "ts": )" + ts +
            R"(, "dur": 5}, {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": )" + ts +
            R"(.5, "dur": 2, "args": {"device": 0, "stream": 7}})";
  }
  return json + "]}";
}

using HardeningTest = CoordinatorTest;

// Defect 1: std::regex recursed over every host-span name (a 40,000-character name overflowed
// the stack and killed the daemon) and backtracked exponentially (`^(a|a)*$` on 31 characters
// burnt a core for good). Patterns now run on RE2, bounded, with a 400 for a bad one.
TEST_F(HardeningTest, StepPatternsCannotCrashOrStallTheCoordinator) {
  StartDaemon();
  const HttpResult imported =
      HttpCall(port_, "POST", "/v1/captures:import?capture=names&name=r.json",
               HostSpanTrace({std::string(40'000, 'a'), std::string(30, 'a') + "b", "train_step_7", "train_step_8"}),
               "application/json");
  ASSERT_EQ(imported.status, 201) << imported.body;

  const HttpResult overflow = HttpCall(port_, "GET", "/v1/captures/names/steps?step_pattern=" + UrlEncode("(a|b)*c"));
  EXPECT_EQ(overflow.status, 200) << overflow.body;
  const HttpResult backtrack = HttpCall(port_, "GET", "/v1/captures/names/steps?step_pattern=" + UrlEncode("^(a|a)*$"));
  EXPECT_EQ(backtrack.status, 200) << backtrack.body;
  // The pattern still finds steps, numbered by its last group of digits.
  const HttpResult steps = HttpCall(port_, "GET", "/v1/captures/names/steps?step_pattern=" + UrlEncode(R"(train_step_(\d+))"));
  ASSERT_EQ(steps.status, 200) << steps.body;
  EXPECT_NE(steps.body.find("\"step_source\":\"pattern\""), std::string::npos) << steps.body;
  EXPECT_NE(steps.body.find("\"step\":7,"), std::string::npos) << steps.body;
  EXPECT_NE(steps.body.find("\"step\":8,"), std::string::npos) << steps.body;

  auto expect_400 = [&](const std::string& pattern, const std::string& detail) {
    HttpResult r = HttpCall(port_, "GET", "/v1/captures/names/steps?step_pattern=" + UrlEncode(pattern));
    EXPECT_EQ(r.status, 400) << pattern << ": " << r.body;
    EXPECT_EQ(r.headers["content-type"], "application/problem+json");
    EXPECT_NE(r.body.find(detail), std::string::npos) << r.body;
  };
  expect_400("([", "is not a valid regex (RE2 syntax)");
  expect_400(R"((a)\1)", "is not a valid regex (RE2 syntax)");
  expect_400(std::string(600, 'a'), "at most 512");
  expect_400("((a{100}){100}){100}", "is not a valid regex");
  EXPECT_EQ(HttpCall(port_, "GET", "/healthz").status, 200);
  EXPECT_EQ(daemon_->Terminate(), 0) << "the coordinator must still be running and stop cleanly";
}

}  // namespace
}  // namespace podscope::testing
