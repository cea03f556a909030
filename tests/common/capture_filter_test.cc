// Export's filters, parsed and applied a worker at a time.
#include "common/capture_filter.h"

#include <gtest/gtest.h>

#include <climits>

namespace podscope::common {
namespace {

TEST(EventFilterTest, RanksAreKeptOnceInOrder) {
  absl::StatusOr<EventFilter> filter = EventFilter::Parse({.ranks = "3,0,0-1,3"});
  ASSERT_TRUE(filter.ok()) << filter.status();
  EXPECT_EQ(filter->ranks(), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_TRUE(filter->KeepsRank(1));
  EXPECT_FALSE(filter->KeepsRank(2));
  EXPECT_EQ(EventFilter::Parse({.window = "2s-1s"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A window after an origin near the end of time ends there rather than wrapping around (signed
// overflow): events near INT64_MAX inside a 24-hour window are kept.
TEST(EventFilterTest, AWindowNearTheEndOfTimeDoesNotWrap) {
  WorkerTrace w;
  const TimeNs origin = INT64_MAX - 10'000'000;  // 10 ms before the end
  const NameId name = w.strings.Intern("op");
  for (TimeNs t : {origin, origin + 1'000'000}) {
    HostSpanTable& h = w.host_spans;
    h.start.push_back(t), h.end.push_back(t + 1'000), h.thread.push_back(1), h.name.push_back(name);
    h.category.push_back(HostSpanCategory::kOp), h.step.push_back(kNoStep);
    h.external_id.push_back(-1);
  }
  absl::StatusOr<EventFilter> filter = EventFilter::Parse({.window = "0ms-1440m"});
  ASSERT_TRUE(filter.ok());
  filter->KeepWindow(origin, &w);
  EXPECT_EQ(w.host_spans.size(), 2u);
}

}  // namespace
}  // namespace podscope::common
