// The codec's list of columns (common/chunk_columns.h) against the trace model: every column of
// every table is in the list, survives a round trip with its own values, and is checked.
#include "common/chunk_columns.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/chunk_codec.h"

namespace podscope::common {
namespace {

constexpr size_t kRows = 5;

// Fills every column of every table through the codec's list: names from the string table,
// enums within range, spans after their base, other columns distinct per column and row.
WorkerTrace Filled() {
  WorkerTrace trace;
  int column_index = 0;
  chunk::ForEachTable([&](const auto& t) {
    auto& table = trace.*t.table;
    chunk::ForEachColumn(t, [&](const auto& col) {
      auto& values = table.*col.values;
      using T = typename std::decay_t<decltype(values)>::value_type;
      values.clear();
      ++column_index;
      for (size_t row = 0; row < kRows; ++row) {
        const int64_t distinct = column_index * 1000 + static_cast<int64_t>(row) * 7 + 1;
        switch (col.coding) {
          case chunk::Coding::kNames:
            if constexpr (std::is_same_v<T, NameId>) {
              values.push_back(
                  trace.strings.Intern(std::string(col.name) + "-" + std::to_string(row)));
            }
            break;
          case chunk::Coding::kEnum:
            values.push_back(static_cast<T>(static_cast<int>(row) % col.enum_count));
            break;
          case chunk::Coding::kSpan:
            if constexpr (std::is_same_v<T, TimeNs>)
              values.push_back((table.*col.base)[row] + distinct);
            break;
          default:
            values.push_back(static_cast<T>(distinct));
        }
      }
    });
  });
  return trace;
}

TEST(ChunkColumnsTest, TheListHasEveryColumnOfEveryTableOnce) {
  WorkerTrace trace;
  size_t tables = 0;
  chunk::ForEachTable([&](const auto& t) {
    ++tables;
    auto& table = trace.*t.table;
    std::set<const void*> model, listed;
    table.ForEachColumn([&](const auto& column) { model.insert(&column); });
    size_t entries = 0;
    chunk::ForEachColumn(t, [&](const auto& col) {
      listed.insert(&(table.*col.values));
      ++entries;
    });
    EXPECT_EQ(listed, model) << t.name
                             << ": a column of the trace model is missing from the chunk's list";
    EXPECT_EQ(entries, model.size()) << t.name << ": a column is listed twice";
  });
  // Every table of a WorkerTrace: kernels, memcpys, runtime calls, host spans, collectives,
  // steps, host samples, memory events.
  EXPECT_EQ(tables, 8u);
}

TEST(ChunkColumnsTest, EveryColumnRoundTripsWithItsOwnValues) {
  const WorkerTrace sent = Filled();
  ASSERT_TRUE(sent.Validate().ok()) << sent.Validate();
  absl::StatusOr<WorkerTrace> got =
      DecodeChunkFromBytes(EncodeChunkToBytes(sent, ChunkHeader{"cap", 0, 0}));
  ASSERT_TRUE(got.ok()) << got.status();
  chunk::ForEachTable([&](const auto& t) {
    const auto& before = sent.*t.table;
    const auto& after = got.value().*t.table;
    ASSERT_EQ(after.size(), kRows) << t.name;
    chunk::ForEachColumn(t, [&](const auto& col) {
      const auto& a = before.*col.values;
      const auto& b = after.*col.values;
      ASSERT_EQ(b.size(), kRows) << t.name << "." << col.name;
      for (size_t row = 0; row < kRows; ++row) {
        if (col.coding == chunk::Coding::kNames) {
          // Ids are the receiver's; the names are what must match.
          if constexpr (std::is_same_v<std::decay_t<decltype(a[row])>, NameId>) {
            EXPECT_EQ(got->strings.Get(b[row]), sent.strings.Get(a[row]))
                << t.name << "." << col.name << " row " << row;
          }
        } else {
          EXPECT_EQ(b[row], a[row]) << t.name << "." << col.name << " row " << row;
        }
      }
    });
  });
}

// A chunk missing the last value of any one column is refused, naming the table (and, but for
// the column that sets the row count, the column).
TEST(ChunkColumnsTest, EveryColumnIsCheckedForItsLength) {
  const WorkerTrace sent = Filled();
  v1::TraceChunk whole;
  EncodeChunk(sent, ChunkHeader{"cap", 0, 0}, &whole);
  size_t checked = 0;
  chunk::ForEachTable([&](const auto& t) {
    bool first = true;
    chunk::ForEachColumn(t, [&](const auto& col) {
      v1::TraceChunk cut = whole;
      auto* field = ((cut.*t.mut)()->*col.mut)();
      if constexpr (std::is_same_v<std::decay_t<decltype(*field)>, std::string>) {
        field->pop_back();
      } else {
        field->RemoveLast();
      }
      WorkerTrace into;
      const absl::Status s = AppendChunk(cut, &into);
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << t.name << "." << col.name;
      const std::string where =
          first ? std::string(t.name) : std::string(t.name) + "." + std::string(col.name);
      EXPECT_NE(std::string(s.message()).find(where), std::string::npos) << s;
      EXPECT_EQ(into.Counts().Total(), 0u)
          << "nothing is appended from a chunk that fails its checks";
      first = false;
      ++checked;
    });
  });
  EXPECT_GT(checked, 60u);
}

// Enum bytes past their count and name ids past the string table are refused too.
TEST(ChunkColumnsTest, EnumsAndNamesAreCheckedForRange) {
  const WorkerTrace sent = Filled();
  v1::TraceChunk whole;
  EncodeChunk(sent, ChunkHeader{"cap", 0, 0}, &whole);
  size_t checked = 0;
  chunk::ForEachTable([&](const auto& t) {
    chunk::ForEachColumn(t, [&](const auto& col) {
      if (col.coding != chunk::Coding::kEnum && col.coding != chunk::Coding::kNames) return;
      v1::TraceChunk bad = whole;
      auto* field = ((bad.*t.mut)()->*col.mut)();
      if constexpr (std::is_same_v<std::decay_t<decltype(*field)>, std::string>) {
        (*field)[0] = static_cast<char>(col.enum_count);
      } else {
        field->Set(0, static_cast<uint32_t>(whole.strings_size()));
      }
      WorkerTrace into;
      const absl::Status s = AppendChunk(bad, &into);
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << t.name << "." << col.name;
      EXPECT_NE(std::string(s.message()).find(std::string(t.name) + "." + std::string(col.name)),
                std::string::npos)
          << s;
      ++checked;
    });
  });
  EXPECT_EQ(checked, 13u);  // 5 enum columns, 8 name columns
}

}  // namespace
}  // namespace podscope::common
