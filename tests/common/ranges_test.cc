#include "common/ranges.h"

#include <gtest/gtest.h>

namespace podscope::common {
namespace {

TEST(RangesTest, RankListsAndRanges) {
  EXPECT_EQ(*ParseRankList("0-3,7"), (std::vector<int32_t>{0, 1, 2, 3, 7}));
  EXPECT_EQ(*ParseRankList(" 5 "), (std::vector<int32_t>{5}));
  for (const char* bad : {"", "x", "3-1", "-2", "1-", "0-70000", "1,,2", "2147483648"}) {
    EXPECT_FALSE(ParseRankList(bad).ok()) << bad;
  }
  int64_t first = -1, last = -1;
  ASSERT_TRUE(ParseIntRange("18852415958-18852415960", &first, &last).ok());
  EXPECT_EQ(first, 18852415958);
  EXPECT_EQ(last, 18852415960);
  ASSERT_TRUE(ParseIntRange("4", &first, &last).ok());
  EXPECT_EQ(first, 4);
  EXPECT_EQ(last, 4);
  EXPECT_EQ(ParseIntRange("5-2", &first, &last).message(),
            "\"5-2\" is not a number or FIRST-LAST range");
}

}  // namespace
}  // namespace podscope::common
