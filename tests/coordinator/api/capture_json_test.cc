#include "coordinator/api/capture_json.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include "common/json_writer.h"

namespace podscope::coordinator {
namespace {

// A live capture's worker says how many records its probe left out, and why, as an object whose
// keys are the reasons (escaped: they are the probe's words, not the coordinator's).
TEST(CaptureJsonTest, AWorkerSaysWhatItsProbeLeftOutAndWhy) {
  storage::CaptureRecord r;
  r.id = "c1";
  r.job = "train";
  r.window_start_ns = 1'000;
  r.window_duration_ns = 5'000;
  storage::WorkerRecord w;
  w.rank = 0;
  w.dropped_events = 15;
  w.dropped_reasons = {{"kernels: no time", 11}, {"CUDA calls: no time", 3}, {"a \"quoted\"", 1}};
  r.workers = {w, storage::WorkerRecord{1, 1}};
  common::JsonWriter out;
  WriteCaptureJson(out, r);
  const std::string json(out.buffer());
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  simdjson::dom::element first = doc["workers"].at(0);
  EXPECT_EQ(first["dropped_events"].get_uint64().value(), 15u);
  simdjson::dom::object reasons = first["dropped_reasons"].get_object();
  EXPECT_EQ(reasons.size(), 3u);
  EXPECT_EQ(reasons["kernels: no time"].get_uint64().value(), 11u);
  EXPECT_EQ(reasons["CUDA calls: no time"].get_uint64().value(), 3u);
  EXPECT_EQ(reasons["a \"quoted\""].get_uint64().value(), 1u);
  EXPECT_EQ(doc["workers"].at(1)["dropped_reasons"].get_object().size(), 0u);
}

}  // namespace
}  // namespace podscope::coordinator
