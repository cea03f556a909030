// The trace export's answers before its body: a rank whose worker sent nothing is a 404 in every
// format, and Kineto's one-rank rule holds for a rank named twice.
#include <gtest/gtest.h>

#include "tests/coordinator/api/rest_api_fixture.h"

namespace podscope::coordinator {
namespace {

TEST(TraceExportTest, ARankWithoutEventsIsNotFoundBeforeAnyBody) {
  podscope::testing::RestApiFixture fixture;
  storage::CaptureRecord record = fixture.SampleRecord("c");
  record.state = storage::CaptureState::kPartial;
  // Rank 1 lost a conflict for its rank and never sent a chunk.
  storage::WorkerRecord failed{1, 1};
  failed.state = "failed";
  record.workers.push_back(failed);
  fixture.Put(record);
  auto get = [&](std::map<std::string, std::string> query) {
    return fixture.Get("/v1/captures/c/trace", std::move(query));
  };
  for (const char* format : {"json", "perfetto", "kineto"}) {
    const http::HttpResponse missing = get({{"format", format}, {"ranks", "1"}});
    EXPECT_EQ(missing.status, 404) << format;
    EXPECT_NE(missing.body.find("capture c holds no events of ranks 1"), std::string::npos)
        << missing.body;
    EXPECT_FALSE(missing.stream) << format;
  }
  const http::HttpResponse twice = get({{"format", "kineto"}, {"ranks", "0,0"}});
  EXPECT_EQ(twice.status, 200) << twice.body;
  EXPECT_TRUE(twice.stream);
  EXPECT_EQ(get({{"format", "kineto"}, {"ranks", "0-1"}}).status, 400);
}

}  // namespace
}  // namespace podscope::coordinator
