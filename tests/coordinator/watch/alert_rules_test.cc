#include "coordinator/watch/alert_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "common/json_text.h"

namespace podscope::coordinator::watch {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(std::string_view json) {
  absl::StatusOr<RuleSet> r = ParseRules(json);
  EXPECT_FALSE(r.ok()) << json;
  return r.ok() ? "" : std::string(r.status().message());
}

TEST(AlertRulesTest, DefaultsHaveOneRuleOfEachKindAndRoundTrip) {
  const RuleSet d = DefaultRules();
  ASSERT_EQ(d.rules.size(), 6u);
  EXPECT_EQ(d.rules[5].kind, AlertKind::kRanksNotReporting);
  EXPECT_EQ(d.rules[5].name, "ranks_not_reporting");
  EXPECT_FALSE(d.rules[5].capture_evidence) << "nothing to capture of ranks that are gone";
  EXPECT_EQ(d.window_steps, 20);
  EXPECT_EQ(d.rules[0].name, "straggler");
  EXPECT_EQ(d.rules[1].kind, AlertKind::kHang);
  EXPECT_EQ(d.rules[1].hysteresis.fire_after, 1);
  EXPECT_EQ(d.rules[1].hang_after_ns, 60'000'000'000);
  absl::StatusOr<RuleSet> again = ParseRules(RulesToJson(d));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(RulesToJson(*again), RulesToJson(d));
}

TEST(AlertRulesTest, NumbersAreWrittenAsPeopleWriteThem) {
  // Boost.JSON alone writes 600 as 6E2 and 0.2 as 2E-1.
  const std::string text = RulesToJson(DefaultRules());
  EXPECT_THAT(text, HasSubstr("\"interval_s\":600,"));
  EXPECT_THAT(text, HasSubstr("\"min_share_of_caused_delay\":0.2,"));
  EXPECT_EQ(text.find('E'), std::string::npos) << text;
  EXPECT_EQ(common::JsonText(boost::json::parse(R"({"a":[1.5,-3,1e300,"E"],"b":{"c":null}})")),
            R"({"a":[1.5,-3,1e+300,"E"],"b":{"c":null}})");
}

TEST(AlertRulesTest, ParsesAHandWrittenRuleSet) {
  absl::StatusOr<RuleSet> r = ParseRules(R"({
    "window_steps": 30,
    "evidence": {"interval_s": 120, "duration_ms": 1500},
    "rules": [
      {"name": "slow-rank", "kind": "straggler", "min_share_of_step_time": 0.01,
       "hysteresis": {"fire_after": 2, "of_windows": 4, "resolve_after": 10}},
      {"name": "stuck", "kind": "hang", "hang_after_s": 5, "job": "llama"},
      {"name": "links", "kind": "allreduce_efficiency", "link_gbytes_per_s": 400, "enabled": false}
    ]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->window_steps, 30);
  EXPECT_EQ(r->evidence_interval_ns, 120'000'000'000);
  EXPECT_EQ(r->evidence_duration_ns, 1'500'000'000);
  ASSERT_EQ(r->rules.size(), 3u);
  EXPECT_DOUBLE_EQ(r->rules[0].min_share_of_step_time, 0.01);
  EXPECT_DOUBLE_EQ(r->rules[0].min_share_of_caused_delay, 0.2) << "unset keys keep their defaults";
  EXPECT_EQ(r->rules[0].hysteresis.resolve_after, 10);
  EXPECT_EQ(r->rules[1].hang_after_ns, 5'000'000'000);
  EXPECT_EQ(r->rules[1].hysteresis.fire_after, 1) << "a hang rule fires on first sight by default";
  EXPECT_EQ(r->rules[1].job, "llama");
  EXPECT_FALSE(r->rules[2].enabled);
  EXPECT_DOUBLE_EQ(r->rules[2].link_gbytes_per_s, 400);
}

TEST(AlertRulesTest, TheLinkIsInGigabytesAndItsOldNameInGigabitsIsRead) {
  absl::StatusOr<RuleSet> old = ParseRules(
      R"({"rules": [{"name": "links", "kind": "allreduce_efficiency", "link_gbps": 400}]})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_DOUBLE_EQ(old->rules[0].link_gbytes_per_s, 50) << "400 Gbit/s";
  EXPECT_THAT(RulesToJson(*old), HasSubstr("\"link_gbytes_per_s\":50,"));
  EXPECT_THAT(ErrorOf(R"({"rules": [{"name": "l", "kind": "allreduce_efficiency", "link_gbps": 400,
                             "link_gbytes_per_s": 50}]})"),
              HasSubstr("give link_gbytes_per_s alone"));
}

TEST(AlertRulesTest, ErrorsNameTheKey) {
  EXPECT_THAT(
      ErrorOf(
          R"({"rules": [{"name": "a", "kind": "straggler", "min_share_of_caused_dely": 0.3}]})"),
      HasSubstr("unknown key \"rules[0].min_share_of_caused_dely\" (did you mean "
                "\"min_share_of_caused_delay\"?"));
  EXPECT_THAT(ErrorOf(R"({"rules": [{"name": "a", "kind": "straggler", "max_slowdown": 0.3}]})"),
              HasSubstr("unknown key \"rules[0].max_slowdown\""))
      << "a key of another kind";
  EXPECT_THAT(
      ErrorOf(R"({"rules": [{"name": "a", "kind": "straggler", "min_share_of_step_time": 2}]})"),
      HasSubstr("rules[0].min_share_of_step_time: 2 is not in 0..1"));
  EXPECT_THAT(ErrorOf(R"({"rules": [{"name": "a", "kind": "slow"}]})"),
              HasSubstr("rules[0].kind: \"slow\" is not one of"));
  EXPECT_THAT(ErrorOf(R"({"rules": [{"kind": "hang"}]})"), HasSubstr("rules[0].name: missing"));
  EXPECT_THAT(ErrorOf(R"({"rules": [{"name": "a b", "kind": "hang"}]})"),
              HasSubstr("rules[0].name: may hold only"));
  EXPECT_THAT(
      ErrorOf(R"({"rules": [{"name": "a", "kind": "hang"}, {"name": "a", "kind": "regression"}]})"),
      HasSubstr("rules[1].name: \"a\" is used twice"));
  EXPECT_THAT(
      ErrorOf(
          R"({"rules": [{"name": "a", "kind": "hang", "hysteresis": {"fire_after": 4, "of_windows": 3}}]})"),
      HasSubstr("rules[0].hysteresis.fire_after: 4 is more than of_windows (3)"));
  EXPECT_THAT(ErrorOf(R"({"window_steps": 1, "rules": []})"),
              HasSubstr("window_steps: 1 is not in 2..1000"));
  EXPECT_THAT(ErrorOf(R"({"windows_steps": 20, "rules": []})"),
              HasSubstr("did you mean \"window_steps\""));
  EXPECT_THAT(ErrorOf(R"({})"), HasSubstr("rules: missing"));
  EXPECT_THAT(ErrorOf(R"([1,2])"), HasSubstr("not a JSON object"));
  EXPECT_THAT(ErrorOf(R"({"rules": [], "rules": []})"), HasSubstr("rules"));
  std::string many = R"({"rules": [)";
  for (int i = 0; i < 65; ++i)
    many +=
        std::string(i ? "," : "") + R"({"name": "r)" + std::to_string(i) + R"(", "kind": "hang"})";
  EXPECT_THAT(ErrorOf(many + "]}"), HasSubstr("more than 64 rules"));
}

// A rule's job is a job name as the store takes it: a control character (an escape sequence in
// a terminal, a forged log line) is refused, naming the key.
TEST(AlertRulesTest, ARulesJobHoldsNoControlCharacters) {
  EXPECT_THAT(ErrorOf(R"({"rules": [{"name": "a", "kind": "hang", "job": "x\u001b[2Jy"}]})"),
              HasSubstr("rules[0].job"));
  EXPECT_THAT(ErrorOf(R"({"rules": [{"name": "a", "kind": "hang", "job": "x\ny"}]})"),
              HasSubstr("printable ASCII"));
  EXPECT_THAT(ErrorOf(R"({"rules": [{"name": "a", "kind": "hang", "job": ")" +
                      std::string(129, 'j') + R"("}]})"),
              HasSubstr("longer than 128 bytes"));
  EXPECT_TRUE(
      ParseRules(R"({"rules": [{"name": "a", "kind": "hang", "job": "llama-70b/run 3"}]})").ok());
}

}  // namespace
}  // namespace podscope::coordinator::watch
