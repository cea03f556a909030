#include "common/string_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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

// Names that share their length and their first, middle and last bytes land in one slot of the
// recent guesses: each must still get its own id, in any order of asking.
TEST(StringTableTest, NamesThatShareAGuessSlotKeepTheirOwnIds) {
  StringTable table;
  std::vector<std::string> names;
  for (int i = 0; i < 26; ++i) {
    std::string name(64, 'k');
    name[20] = static_cast<char>('a' + i);  // outside the bytes the slot is chosen by
    names.push_back(name);
  }
  std::vector<NameId> ids;
  for (const std::string& name : names) ids.push_back(table.Intern(name));
  for (int round = 0; round < 3; ++round) {
    for (size_t i = names.size(); i-- > 0;) EXPECT_EQ(table.Intern(names[i]), ids[i]) << i;
    for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(table.Intern(names[i]), ids[i]) << i;
  }
  EXPECT_EQ(table.size(), 27u);
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(table.Get(ids[i]), names[i]);
  // Short names, and names that differ only in length.
  EXPECT_NE(table.Intern("ab"), table.Intern("abb"));
  EXPECT_EQ(table.Intern("ab"), table.Intern(std::string("ab")));
  EXPECT_EQ(table.Intern(std::string(64, 'k')), table.Find(std::string(64, 'k')));
}

// A table moved from keeps guesses that point past its (now empty) names: interning into it
// must neither read them nor hand out their ids.
TEST(StringTableTest, ATableMovedFromCanBeFilledAgain) {
  StringTable table;
  for (int i = 0; i < 100; ++i) table.Intern("kernel-" + std::to_string(i));
  StringTable moved = std::move(table);
  const NameId a = table.Intern("kernel-50");  // NOLINT(bugprone-use-after-move): the point
  const NameId b = table.Intern("kernel-99");
  EXPECT_NE(a, b);
  EXPECT_EQ(table.Intern("kernel-50"), a);
  EXPECT_EQ(table.Get(a), "kernel-50");
  EXPECT_EQ(table.Get(b), "kernel-99");
  EXPECT_EQ(moved.Intern("kernel-50"), 51u);
  StringTable assigned;
  assigned.Intern("other");
  assigned = moved;
  EXPECT_EQ(assigned.Intern("kernel-99"), 100u);
  EXPECT_EQ(assigned.Find("other"), StringTable::kNotFound);
}

TEST(StringTableTest, TheNameHashReadsEveryByte) {
  const NameHash hash;
  std::string name(200, 'x');
  const size_t base = hash(name);
  for (size_t i = 0; i < name.size(); ++i) {
    std::string changed = name;
    changed[i] = 'y';
    EXPECT_NE(hash(changed), base) << "byte " << i;
  }
  for (size_t n = 0; n < 40; ++n)
    EXPECT_NE(hash(std::string(n, 'x')), hash(std::string(n + 1, 'x')));
  // Blocks whose second half is a constant the hash once used as it was (which zeroed the
  // product and erased the first half): the first half still counts.
  std::string crafted(48, 'a');
  const std::string constant = "\x4f\xeb\xd4\x27\x3d\xae\xb2\xc2";
  crafted.replace(8, 8, constant);
  crafted.replace(24, 8, constant);
  const size_t crafted_hash = hash(crafted);
  for (const size_t i : {0, 3, 7, 16, 20}) {
    std::string changed = crafted;
    changed[i] = 'b';
    EXPECT_NE(hash(changed), crafted_hash) << "byte " << i;
  }
}

}  // namespace
}  // namespace podscope::common
