// The trace export's answers before its body: a rank whose worker sent nothing is a 404 in every
// format, and Kineto's one-rank rule holds for a rank named twice.
#include <gtest/gtest.h>

#include "common/time_source.h"
#include "coordinator/api/rest_api.h"
#include "coordinator/http/http_types.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/common/sample_trace.h"
#include "tests/test_paths.h"

namespace podscope::coordinator {
namespace {

TEST(TraceExportTest, ARankWithoutEventsIsNotFoundBeforeAnyBody) {
  podscope::testing::ScratchDir dir;
  absl::StatusOr<std::unique_ptr<storage::RocksDbTraceStore>> store =
      storage::RocksDbTraceStore::Open({.path = dir.File("db")});
  ASSERT_TRUE(store.ok()) << store.status();
  common::WorkerTrace trace = podscope::testing::MakeSampleTrace();
  trace.info.rank = 0;
  storage::CaptureRecord record;
  record.id = "c";
  record.job = "j";
  record.state = storage::CaptureState::kPartial;
  record.events = trace.Counts().Total();
  record.workers.push_back({0, 0, "", "", record.events});
  // Rank 1 lost a conflict for its rank and never sent a chunk.
  storage::WorkerRecord failed{1, 1};
  failed.state = "failed";
  record.workers.push_back(failed);
  ASSERT_TRUE((*store)->PutChunk("c", 0, 0, trace).ok());
  ASSERT_TRUE((*store)->PutCapture(record).ok());
  common::SimulatedTimeSource time(0);
  absl::Mutex mutations;
  RestApi api(**store, ApiLimits{}, time, mutations);
  Router router;
  api.Register(router);
  auto get = [&](std::map<std::string, std::string> query) {
    std::map<std::string, std::string> params;
    bool path_matched = false;
    const Route* route = router.Match("GET", "/v1/captures/c/trace", &params, &path_matched);
    EXPECT_NE(route, nullptr);
    HttpRequest r;
    r.method = "GET";
    r.path = "/v1/captures/c/trace";
    r.params = std::move(params);
    r.query = std::move(query);
    return route->handler(r);
  };
  for (const char* format : {"json", "perfetto", "kineto"}) {
    const HttpResponse missing = get({{"format", format}, {"ranks", "1"}});
    EXPECT_EQ(missing.status, 404) << format;
    EXPECT_NE(missing.body.find("capture c holds no events of ranks 1"), std::string::npos)
        << missing.body;
    EXPECT_FALSE(missing.stream) << format;
  }
  const HttpResponse twice = get({{"format", "kineto"}, {"ranks", "0,0"}});
  EXPECT_EQ(twice.status, 200) << twice.body;
  EXPECT_TRUE(twice.stream);
  EXPECT_EQ(get({{"format", "kineto"}, {"ranks", "0-1"}}).status, 400);
}

}  // namespace
}  // namespace podscope::coordinator
