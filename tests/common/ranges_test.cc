#include "common/ranges.h"

#include <gtest/gtest.h>

#include <string>

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

// A short text never expands past its bound: 32 bytes once made 65,537 ranks per part.
TEST(RangesTest, RankListsHaveABoundInAllAndFormatAsRanges) {
  EXPECT_EQ(ParseRankList("0-65535")->size(), 65'536u);
  EXPECT_EQ(ParseRankList("0-65535,70000").status().message(), "more than 65536 ranks");
  EXPECT_EQ(ParseRankList("0-9,0-9,0-9", 25).status().message(), "more than 25 ranks");
  EXPECT_EQ(ParseRankList("0-9,0-9", 20)->size(), 20u);
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "0-65535,";
  EXPECT_FALSE(ParseRankList(many + "1").ok());
  EXPECT_EQ(FormatRankList({7, 0, 1, 2, 3, 3, 9, 10}), "0-3,7,9-10");
  EXPECT_EQ(FormatRankList({}), "");
  EXPECT_EQ(FormatRankList({5}), "5");
  EXPECT_EQ(*ParseRankList(FormatRankList({4, 2, 3, 11})), (std::vector<int32_t>{2, 3, 4, 11}));
}

}  // namespace
}  // namespace podscope::common
