// Set-aside records: kept across starts within their bounds, never dropped silently.
#include "storage/set_aside.h"

#include <gtest/gtest.h>

#include "storage/rocksdb_trace_store.h"
#include "tests/test_paths.h"

namespace podscope::storage {
namespace {

TEST(SetAsideTest, RecordsAccumulateAcrossStartsNewestKeptWithinTheBounds) {
  testing::ScratchDir dir;
  auto store = std::move(*RocksDbTraceStore::Open({.path = dir.File("db")}));
  EXPECT_TRUE(ReadSetAside(*store, "things")->empty());
  ASSERT_TRUE(
      SetAside(*store, "things", {{.id = "a", .error = "bad", .record = "{\"x\":\"\\u0001\"}"}})
          .ok());
  absl::StatusOr<std::vector<SetAsideRecord>> all =
      SetAside(*store, "things", {{.id = "b", .error = "worse", .record = "7", .set_aside_ns = 5}});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].record, "{\"x\":\"\\u0001\"}") << "kept byte for byte";
  EXPECT_EQ((*all)[1].set_aside_ns, 5);
  EXPECT_EQ(ReadSetAside(*store, "things")->size(), 2u);
  EXPECT_EQ(SetAsideToJson({{.id = "i", .error = "e", .record = "r\n", .set_aside_ns = 3}}),
            R"([{"id":"i","error":"e","record":"r\n","set_aside_ns":3}])");

  // Past the count bound, the oldest go; a long text is cut and says so; control characters
  // (six bytes each once escaped) still fit in a setting.
  std::vector<SetAsideRecord> many;
  for (int i = 0; i < 100; ++i) {
    many.push_back({.id = std::to_string(i), .error = "x", .record = std::string(20'000, '\x01')});
  }
  all = SetAside(*store, "things", std::move(many));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_LE(all->size(), kMaxSetAsideRecords);
  EXPECT_EQ(all->back().id, "99");
  EXPECT_EQ(all->back().record.size(), kMaxSetAsideRecordBytes);
  EXPECT_NE(all->back().error.find("cut to 8192 bytes"), std::string::npos);
  EXPECT_LE(SetAsideToJson(*all).size(), kMaxSetAsideBytes);
  EXPECT_EQ(ReadSetAside(*store, "things")->size(), all->size());

  // A damaged companion is itself kept, as one record.
  ASSERT_TRUE(store->PutSetting("other.set_aside", "{oops").ok());
  absl::StatusOr<std::vector<SetAsideRecord>> damaged = ReadSetAside(*store, "other");
  ASSERT_EQ(damaged->size(), 1u);
  EXPECT_EQ((*damaged)[0].record, "{oops");
}

}  // namespace
}  // namespace podscope::storage
