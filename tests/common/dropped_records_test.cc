#include "common/dropped_records.h"

#include <gtest/gtest.h>

#include <limits>

namespace podscope::common {
namespace {

google::protobuf::RepeatedPtrField<v1::DroppedRecords> Reported(
    std::initializer_list<std::pair<std::string, uint64_t>> list) {
  google::protobuf::RepeatedPtrField<v1::DroppedRecords> out;
  for (const auto& [reason, n] : list) {
    v1::DroppedRecords* d = out.Add();
    d->set_reason(reason);
    d->set_count(n);
  }
  return out;
}

TEST(DroppedRecordsTest, CountsAreSummedByReason) {
  EXPECT_EQ(
      BoundedDroppedReasons(Reported({{"kernels: no time", 2}, {"a", 1}, {"kernels: no time", 3}})),
      (std::map<std::string, uint64_t>{{"kernels: no time", 5}, {"a", 1}}));
  EXPECT_TRUE(BoundedDroppedReasons(Reported({})).empty());
}

// A hostile peer: a million distinct reasons, each a megabyte, counts that would wrap.
TEST(DroppedRecordsTest, WhatAPeerSendsIsBounded) {
  google::protobuf::RepeatedPtrField<v1::DroppedRecords> many;
  for (int i = 0; i < 1000; ++i) {
    v1::DroppedRecords* d = many.Add();
    d->set_reason(std::string(1 << 20, 'x') + std::to_string(i));
    d->set_count(std::numeric_limits<uint64_t>::max() / 2);
  }
  const std::map<std::string, uint64_t> kept = BoundedDroppedReasons(many);
  EXPECT_EQ(kept.size(), 1u) << "cut to 120 bytes, the reasons are one";
  EXPECT_EQ(kept.begin()->first.size(), kMaxDroppedReasonBytes);
  EXPECT_EQ(kept.begin()->second, std::numeric_limits<uint64_t>::max()) << "saturates";

  google::protobuf::RepeatedPtrField<v1::DroppedRecords> distinct;
  for (int i = 0; i < 100; ++i) {
    v1::DroppedRecords* d = distinct.Add();
    d->set_reason("reason " + std::to_string(i));
    d->set_count(1);
  }
  const std::map<std::string, uint64_t> bounded = BoundedDroppedReasons(distinct);
  EXPECT_EQ(bounded.size(), kMaxDroppedReasons + 1);
  EXPECT_EQ(bounded.at(kOtherDroppedReason), 100 - kMaxDroppedReasons);
  EXPECT_EQ(bounded.at("reason 0"), 1u);

  // Multi-byte characters cut anywhere, and terminal escapes: printable ASCII comes out.
  const std::map<std::string, uint64_t> printable = BoundedDroppedReasons(
      Reported({{std::string(119, 'a') + "\xc3\xa9", 1}, {"\x1b[2Jkernels\n", 2}}));
  ASSERT_EQ(printable.size(), 2u);
  for (const auto& [reason, n] : printable) {
    for (char c : reason) EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << reason;
  }
  EXPECT_EQ(printable.at(std::string(119, 'a') + "?"), 1u);
  EXPECT_EQ(printable.at("?[2Jkernels?"), 2u);
}

}  // namespace
}  // namespace podscope::common
