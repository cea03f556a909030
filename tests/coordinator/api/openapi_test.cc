// Every route the server registers is in the OpenAPI document, and vice versa, with the role it
// needs (x-podscope-role): the integration tests walk the document to attack every route.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <set>

#include "analysis/analysis_run.h"
#include "common/time_source.h"
#include "coordinator/api/live_api.h"
#include "coordinator/api/rest_api.h"
#include "coordinator/api/schedules_api.h"
#include "coordinator/api/watch_api.h"
#include "coordinator/ui/ui_routes.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/test_paths.h"

namespace podscope::coordinator {
namespace {

TEST(OpenApiTest, DocumentMatchesTheRegisteredRoutes) {
  podscope::testing::ScratchDir dir;
  auto store = storage::RocksDbTraceStore::Open({.path = dir.File("db")});
  ASSERT_TRUE(store.ok());
  absl::Mutex mutations;
  common::SimulatedTimeSource time(0);
  RestApi api(**store, {}, time, mutations);
  http::Router router;
  api.Register(router);
  AgentRegistry registry({}, time);
  ClockAligner aligner;
  CaptureScheduler scheduler(**store, registry, aligner, {});
  LiveApi live(registry, aligner, scheduler, time);
  live.Register(router);
  auto watch = watch::WatchService::Create(**store);
  ASSERT_TRUE(watch.ok());
  WatchApi watch_api(**watch);
  watch_api.Register(router);
  auto schedules = ScheduleRunner::Create(**store, time, {});
  ASSERT_TRUE(schedules.ok());
  SchedulesApi schedules_api(**schedules, [](const ScheduleSpec&) { return true; });
  schedules_api.Register(router);
  RegisterUi(router);
  std::set<std::string> registered;
  for (const http::Route& r : router.routes()) {
    std::string method = r.method;
    for (char& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    registered.insert(method + " " + r.pattern + " " + std::string(http::AccessName(r.access)));
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const std::string text(OpenApiDocument());
  ASSERT_EQ(parser.parse(text).get(doc), simdjson::SUCCESS) << "openapi.json is not valid JSON";
  std::set<std::string> documented;
  simdjson::dom::object paths;
  ASSERT_EQ(doc["paths"].get_object().get(paths), simdjson::SUCCESS);
  for (auto [path, item] : paths) {
    for (auto [method, operation] : item.get_object()) {
      if (method == "parameters") continue;
      std::string_view role;
      EXPECT_EQ(operation["x-podscope-role"].get_string().get(role), simdjson::SUCCESS)
          << method << " " << path;
      documented.insert(std::string(method) + " " + std::string(path) + " " + std::string(role));
    }
  }
  EXPECT_EQ(registered, documented);
}

// The analyses a capture answers are the CLI's reports, every one of them.
TEST(OpenApiTest, TheReportParameterListsEveryReport) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const std::string text(OpenApiDocument());
  ASSERT_EQ(parser.parse(text).get(doc), simdjson::SUCCESS);
  std::vector<std::string> documented;
  for (simdjson::dom::element p :
       doc["paths"]["/v1/captures/{id}/{report}"]["parameters"].get_array()) {
    std::string_view name;
    if (p["name"].get(name) != simdjson::SUCCESS || name != "report") continue;  // not the $ref
    for (simdjson::dom::element e : p["schema"]["enum"].get_array())
      documented.emplace_back(std::string_view(e));
  }
  EXPECT_EQ(documented, std::vector<std::string>(std::begin(analysis::kReportNames),
                                                 std::end(analysis::kReportNames)));
}

TEST(OpenApiTest, OnlyTheProbesAndTheUisFilesAreOpenAndAnUnclassifiedRouteIsAdminOnly) {
  EXPECT_EQ(http::Route{}.access, http::Access::kAdmin);
  podscope::testing::ScratchDir dir;
  auto store = storage::RocksDbTraceStore::Open({.path = dir.File("db")});
  ASSERT_TRUE(store.ok());
  absl::Mutex mutations;
  common::SimulatedTimeSource time(0);
  RestApi api(**store, {}, time, mutations);
  http::Router router;
  api.Register(router);
  RegisterUi(router);
  std::set<std::string> open;
  for (const http::Route& r : router.routes()) {
    if (r.access == http::Access::kOpen) open.insert(r.pattern);
  }
  EXPECT_EQ(open, (std::set<std::string>{"/healthz", "/readyz", "/", "/ui/{file}"}));
  EXPECT_TRUE(router.SetAccess("GET", "/metrics", http::Access::kOpen));
  EXPECT_FALSE(router.SetAccess("GET", "/no-such-route", http::Access::kOpen));
}

}  // namespace
}  // namespace podscope::coordinator
