#include "common/string_table.h"

#include <gtest/gtest.h>

namespace podscope::common {
namespace {

TEST(StringTableTest, IdZeroIsTheEmptyString) {
  StringTable table;
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.Get(kEmptyName), "");
  EXPECT_EQ(table.Intern(""), kEmptyName);
}

TEST(StringTableTest, InternDeduplicatesAndKeepsIdsDense) {
  StringTable table;
  const NameId a = table.Intern("aten::mm");
  const NameId b = table.Intern("ncclKernel_AllReduce");
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  EXPECT_EQ(table.Intern(std::string("aten::mm")), a);
  EXPECT_EQ(table.Find("ncclKernel_AllReduce"), b);
  EXPECT_EQ(table.Find("missing"), StringTable::kNotFound);
  EXPECT_EQ(table.payload_bytes(), 8u + 20u);
}

TEST(StringTableTest, CopiesAndMovesKeepValidViews) {
  StringTable table;
  for (int i = 0; i < 1000; ++i) table.Intern("name-" + std::to_string(i));
  StringTable copy = table;
  StringTable moved = std::move(table);
  EXPECT_EQ(copy.Get(501), "name-500");
  EXPECT_EQ(moved.Get(501), "name-500");
  EXPECT_EQ(copy.Find("name-999"), 1000u);
  EXPECT_EQ(moved.Find("name-999"), 1000u);
}

}  // namespace
}  // namespace podscope::common
