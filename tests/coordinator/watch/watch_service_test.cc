// The watch service's stored rules: what reads back is applied, what does not is set aside.
#include "coordinator/watch/watch_service.h"

#include <gtest/gtest.h>

#include "common/time_source.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/test_paths.h"

namespace podscope::coordinator::watch {
namespace {

TEST(StoredRulesTest, ARuleThatNoLongerParsesIsSetAsideAndTheOthersApply) {
  const StoredRules stored = ParseStoredRules(R"({"window_steps": 30, "rules": [
      {"name": "slow", "kind": "straggler", "min_share_of_step_time": 0.05},
      {"name": "broken", "kind": "straggler", "min_share_of_step_time": 7},
      {"name": "stuck", "kind": "hang", "hang_after_s": 5},
      {"name": "slow", "kind": "regression"},
      {"kind": "nonsense"}]})");
  EXPECT_EQ(stored.rules.window_steps, 30);
  ASSERT_EQ(stored.rules.rules.size(), 2u);
  EXPECT_EQ(stored.rules.rules[0].name, "slow");
  EXPECT_EQ(stored.rules.rules[1].hang_after_ns, 5'000'000'000);
  ASSERT_EQ(stored.set_aside.size(), 3u);
  EXPECT_EQ(stored.set_aside[0].id, "broken");
  EXPECT_NE(stored.set_aside[0].error.find("min_share_of_step_time"), std::string::npos)
      << stored.set_aside[0].error;
  EXPECT_NE(stored.set_aside[0].record.find("\"broken\""), std::string::npos);
  EXPECT_EQ(stored.set_aside[1].error, "a second rule with this name");
  EXPECT_EQ(stored.set_aside[2].id, "rules[4]");
}

TEST(StoredRulesTest, SettingsThatDoNotParseSetTheWholeTextAsideAndTheDefaultsApply) {
  for (const std::string text :
       {R"({"window_steps": 1, "rules": []})", R"({"rules": 3})", "not json", "[]"}) {
    const StoredRules stored = ParseStoredRules(text);
    EXPECT_EQ(RulesToJson(stored.rules), RulesToJson(DefaultRules())) << text;
    ASSERT_EQ(stored.set_aside.size(), 1u) << text;
    EXPECT_EQ(stored.set_aside[0].id, "");
    EXPECT_EQ(stored.set_aside[0].record, text);
    EXPECT_NE(stored.set_aside[0].error.find("the default rules apply"), std::string::npos);
  }
  EXPECT_TRUE(ParseStoredRules(RulesToJson(DefaultRules())).set_aside.empty());
}

// Set aside at start-up and kept; GET's answer lists them, and PUT takes that answer back.
TEST(StoredRulesTest, TheServiceStartsOnDamagedRulesAndListsWhatItSetAside) {
  testing::ScratchDir dir;
  auto store = std::move(*storage::RocksDbTraceStore::Open({.path = dir.File("db")}));
  ASSERT_TRUE(store
                  ->PutSetting(kRulesSetting,
                               R"({"rules": [{"name": "a", "kind": "hang", "hang_after_s": 0}]})")
                  .ok());
  absl::StatusOr<std::unique_ptr<WatchService>> service = WatchService::Create(*store);
  ASSERT_TRUE(service.ok()) << service.status();
  ASSERT_EQ((*service)->SetAside().size(), 1u);
  EXPECT_EQ((*service)->SetAside()[0].id, "a");
  const std::string json = (*service)->RulesJson();
  EXPECT_NE(json.find(R"("set_aside":[{"id":"a","error":")"), std::string::npos) << json;
  EXPECT_TRUE((*service)->SetRules(json).ok());
  EXPECT_FALSE(store->GetSetting(kRulesSetting)->value().find("hang_after_s\":0") !=
               std::string::npos)
      << "stored again without it";
}

common::DecodedWatch StepsOf(std::initializer_list<std::string> jobs) {
  common::DecodedWatch batch;
  for (const std::string& job : jobs) {
    common::StepSummary s;
    s.end_ns = 1;
    batch.steps.emplace_back(job, s);
  }
  return batch;
}

// One agent's data opens at most max_jobs_per_agent jobs; other agents keep theirs, and a job
// the engine has no room for is not held against the agent that asked.
TEST(WatchServiceTest, EachAgentOpensABoundedShareOfTheJobs) {
  testing::ScratchDir dir;
  auto store = std::move(*storage::RocksDbTraceStore::Open({.path = dir.File("db")}));
  common::SimulatedTimeSource time(1'000'000'000'000);
  WatchServiceOptions options;
  options.max_jobs_per_agent = 2;
  options.engine.max_jobs = 3;
  options.engine.forget_quiet_after_ns = 1'000'000'000;
  auto service = std::move(*WatchService::Create(*store, time, options));
  service->Ingest("hostile", StepsOf({"a", "b", "c", "d"}));
  EXPECT_EQ(service->counters().refused_jobs, 2u);
  EXPECT_EQ(service->counters().steps, 2u);
  service->Ingest("good", StepsOf({"e", "f"}));  // one slot left in the engine
  EXPECT_EQ(service->counters().refused_jobs, 3u);
  service->Ingest("good", StepsOf({"e"}));
  EXPECT_EQ(service->counters().steps, 4u);
  // Quiet jobs go, and with them the agent's share: the hostile agent's two went quiet.
  service->Evaluate();
  time.AdvanceBy(200'000'000'000);  // past twice the default hang rule's 60 s
  service->Ingest("good", StepsOf({"e"}));
  service->Evaluate();
  EXPECT_EQ(service->counters().forgotten_jobs, 2u);
  service->Ingest("good", StepsOf({"f"}));  // "f" was refused for room, not for its share
  EXPECT_EQ(service->counters().refused_jobs, 3u);
  EXPECT_EQ(service->counters().steps, 6u);
  // The hostile agent's share is back; the engine's last slot takes one of its two.
  service->Ingest("hostile", StepsOf({"g", "h"}));
  EXPECT_EQ(service->counters().refused_jobs, 4u);
  EXPECT_EQ(service->counters().steps, 7u);
}

}  // namespace
}  // namespace podscope::coordinator::watch
