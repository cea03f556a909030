// The REST API's handlers in-process, over a RocksDB store in a scratch directory: captures put
// straight into the store, requests handed to the matched route (no daemon, no sockets).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "common/time_source.h"
#include "coordinator/api/rest_api.h"
#include "http/http_types.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/common/sample_trace.h"
#include "tests/test_paths.h"

namespace podscope::testing {

class RestApiFixture {
 public:
  explicit RestApiFixture(const coordinator::ApiLimits& limits = {})
      : store_(std::move(*storage::RocksDbTraceStore::Open({.path = dir_.File("db")}))),
        api_(*store_, limits, time_, mutations_) {
    api_.Register(router_);
  }

  // Capture `id` of one worker, rank 0, the sample trace; more workers may be added to `record`
  // before it is put.
  storage::CaptureRecord SampleRecord(const std::string& id) {
    common::WorkerTrace trace = MakeSampleTrace();
    trace.info.rank = 0;
    storage::CaptureRecord record;
    record.id = id;
    record.job = "j";
    record.state = storage::CaptureState::kComplete;
    record.events = trace.Counts().Total();
    record.workers.push_back({0, 0, "", "", record.events});
    EXPECT_TRUE(store_->PutChunk(id, 0, 0, trace).ok());
    return record;
  }
  void Put(const storage::CaptureRecord& record) { EXPECT_TRUE(store_->PutCapture(record).ok()); }

  http::HttpResponse Get(const std::string& path, std::map<std::string, std::string> query = {}) {
    std::map<std::string, std::string> params;
    bool path_matched = false;
    const http::Route* route = router_.Match("GET", path, &params, &path_matched);
    EXPECT_NE(route, nullptr) << path;
    if (route == nullptr) return http::HttpResponse::Problem(404, "Not Found", path);
    http::HttpRequest r;
    r.method = "GET";
    r.path = path;
    r.params = std::move(params);
    r.query = std::move(query);
    return route->handler(r);
  }

  coordinator::RestApi& api() { return api_; }

 private:
  ScratchDir dir_;
  std::unique_ptr<storage::RocksDbTraceStore> store_;
  common::SimulatedTimeSource time_{0};
  absl::Mutex mutations_;
  coordinator::RestApi api_;
  http::Router router_;
};

}  // namespace podscope::testing
