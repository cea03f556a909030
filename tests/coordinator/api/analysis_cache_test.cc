#include "coordinator/api/analysis_cache.h"

#include <gtest/gtest.h>

namespace podscope::coordinator {
namespace {

TEST(AnalysisCacheIndexTest, EvictsLeastRecentlyUsedByBytes) {
  AnalysisCacheIndex cache(/*max_bytes=*/100);
  EXPECT_TRUE(cache.Insert("a", "steps", 40).empty());
  EXPECT_TRUE(cache.Insert("a", "pod", 30).empty());
  EXPECT_TRUE(cache.Insert("b", "steps", 30).empty());
  cache.Touch("a", "steps");  // now b/steps ... a/pod is the oldest
  const std::vector<AnalysisCacheIndex::Entry> evicted = cache.Insert("b", "pod", 25);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].capture_id, "a");
  EXPECT_EQ(evicted[0].key, "pod");
  EXPECT_EQ(evicted[0].bytes, 30u);
  EXPECT_EQ(cache.bytes(), 95u);
  // Re-inserting a key replaces it; an entry bigger than the bound evicts everything, itself too.
  EXPECT_TRUE(cache.Insert("b", "pod", 5).empty());
  EXPECT_EQ(cache.bytes(), 75u);
  EXPECT_EQ(cache.Insert("c", "huge", 500).size(), 4u);
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(AnalysisCacheIndexTest, ForgetsACapture) {
  AnalysisCacheIndex cache(1000);
  cache.Insert("a", "steps", 10);
  cache.Insert("b", "steps", 20);
  cache.Insert("a", "pod", 30);
  const std::vector<AnalysisCacheIndex::Entry> gone = cache.ForgetCapture("a");
  ASSERT_EQ(gone.size(), 2u);
  EXPECT_EQ(cache.bytes(), 20u);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_TRUE(cache.ForgetCapture("a").empty());
}

}  // namespace
}  // namespace podscope::coordinator
