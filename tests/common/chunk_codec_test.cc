#include "common/chunk_codec.h"

#include <gtest/gtest.h>

#include "common/kineto/kineto_importer.h"
#include "podscope/v1/trace.pb.h"
#include "tests/common/sample_trace.h"
#include "tests/test_paths.h"

namespace podscope::common {
namespace {

using podscope::testing::ExpectSameEvents;
using podscope::testing::MakeSampleTrace;

TEST(ChunkCodecTest, RoundTripsEveryColumnAndWorkerInfo) {
  const WorkerTrace original = MakeSampleTrace();
  const std::string bytes = EncodeChunkToBytes(original, {"cap-1", 2, 0});
  absl::StatusOr<WorkerTrace> decoded = DecodeChunkFromBytes(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSameEvents(original, *decoded);
  EXPECT_EQ(decoded->info.rank, 2);
  EXPECT_EQ(decoded->info.host, "node-1");
  EXPECT_EQ(decoded->info.devices, original.info.devices);
  EXPECT_EQ(decoded->info.process_groups, original.info.process_groups);
  EXPECT_EQ(decoded->info.tracks, original.info.tracks);
  EXPECT_EQ(decoded->clock, original.clock);
  EXPECT_TRUE(decoded->Validate().ok());
}

TEST(ChunkCodecTest, ExtremeValuesRoundTrip) {
  WorkerTrace w = MakeSampleTrace();
  w.kernels.start[0] = INT64_MIN;
  w.kernels.end[0] = INT64_MAX;
  w.kernels.correlation[1] = INT64_MIN;
  absl::StatusOr<WorkerTrace> decoded = DecodeChunkFromBytes(EncodeChunkToBytes(w, {}));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->kernels.start[0], INT64_MIN);
  EXPECT_EQ(decoded->kernels.end[0], INT64_MAX);
  EXPECT_EQ(decoded->kernels.correlation[1], INT64_MIN);
}

TEST(ChunkCodecTest, AppendingTwoChunksRemapsNames) {
  const WorkerTrace a = MakeSampleTrace();
  WorkerTrace b;
  b.info = a.info;
  b.strings.Intern("something else first");
  b.kernels = a.kernels;
  // Re-point b's kernel names at its own table.
  for (NameId& id : b.kernels.name) id = b.strings.Intern(a.strings.Get(id));
  v1::TraceChunk ca, cb;
  EncodeChunk(a, {"cap", 0, 0}, &ca);
  EncodeChunk(b, {"cap", 0, 1}, &cb);
  WorkerTrace merged;
  ASSERT_TRUE(AppendChunk(ca, &merged).ok());
  ASSERT_TRUE(AppendChunk(cb, &merged).ok());
  ASSERT_EQ(merged.kernels.size(), 6u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(merged.strings.Get(merged.kernels.name[3 + i]), a.strings.Get(a.kernels.name[i]));
    EXPECT_EQ(merged.kernels.end[3 + i], a.kernels.end[i]);
  }
  EXPECT_TRUE(merged.Validate().ok());
}

TEST(ChunkCodecTest, MalformedChunksAreRejectedWithoutPartialWrites) {
  const WorkerTrace original = MakeSampleTrace();
  v1::TraceChunk good;
  EncodeChunk(original, {}, &good);

  struct Case {
    const char* what;
    std::function<void(v1::TraceChunk&)> damage;
    const char* message;
  };
  const Case cases[] = {
      {"ragged", [](v1::TraceChunk& c) { c.mutable_kernels()->mutable_stream()->RemoveLast(); },
       "kernels.stream: 2 values, expected 3"},
      {"bad name", [](v1::TraceChunk& c) { c.mutable_memcpys()->set_name(0, 999); },
       "name id 999 outside the string table"},
      {"bad enum", [](v1::TraceChunk& c) { (*c.mutable_collectives()->mutable_op())[0] = 77; },
       "collectives.op: value 77 out of range"},
      {"newer format", [](v1::TraceChunk& c) { c.set_format_version(kChunkFormatVersion + 1); },
       "format version 2 is not supported"},
      {"bad clock source", [](v1::TraceChunk& c) { c.mutable_clock()->set_source(9); },
       "clock source 9 out of range"},
  };
  for (const Case& test : cases) {
    v1::TraceChunk chunk = good;
    test.damage(chunk);
    WorkerTrace target;
    absl::Status status = AppendChunk(chunk, &target);
    EXPECT_FALSE(status.ok()) << test.what;
    EXPECT_NE(status.message().find(test.message), std::string::npos)
        << test.what << ": " << status;
    EXPECT_EQ(target.Counts().Total(), 0u) << test.what;
  }
  EXPECT_EQ(DecodeChunkFromBytes("\xff\xff\xff garbage").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(ChunkCodecTest, RealFixtureRoundTripsAndPacksSmallerThanJson) {
  KinetoImporter importer;
  absl::StatusOr<ImportResult> imported =
      importer.ImportFile(podscope::testing::KinetoFixture("trace_filter/sampled_rank-0.json.gz"));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const WorkerTrace& original = imported->workers.at(0);
  const std::string bytes = EncodeChunkToBytes(original, {"cap", 0, 0});
  absl::StatusOr<WorkerTrace> decoded = DecodeChunkFromBytes(bytes);
  ASSERT_TRUE(decoded.ok());
  ExpectSameEvents(original, *decoded);
  // Columnar + delta encoding: far smaller than the source JSON (1,759,570 bytes).
  EXPECT_LT(bytes.size(), imported->json_bytes / 4);
}

}  // namespace
}  // namespace podscope::common
