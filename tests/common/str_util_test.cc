#include "common/str_util.h"

#include <gtest/gtest.h>

namespace podscope::common {
namespace {

TEST(StrUtilTest, CountedIsPluralUnlessTheCountIsOne) {
  EXPECT_EQ(Counted(0, "file"), "0 files");
  EXPECT_EQ(Counted(1, "file"), "1 file");
  EXPECT_EQ(Counted(2, "file"), "2 files");
  EXPECT_EQ(Counted(1, "entry", "entries"), "1 entry");
  EXPECT_EQ(Counted(12, "entry", "entries"), "12 entries");
}

}  // namespace
}  // namespace podscope::common
