// Regression tests for the defects an adversarial run against the real coordinator found
// (issue 12): each one crashed, stalled or corrupted the daemon before its fix.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "common/file_io.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/daemon.h"
#include "tests/test_paths.h"

namespace podscope::testing {
namespace {

std::string UrlEncode(const std::string& text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// A Kineto trace whose host spans have the given names, 5 us each, with a 2 us kernel inside each.
std::string HostSpanTrace(const std::vector<std::string>& names) {
  std::string json = R"({"traceEvents": [)";
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string ts = std::to_string(10 * (i + 1));
    if (i > 0) json += ",";
    json += R"({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "name": ")" + names[i] + R"(", "ts": )" + ts +
            R"(, "dur": 5}, {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": )" + ts +
            R"(.5, "dur": 2, "args": {"device": 0, "stream": 7}})";
  }
  return json + "]}";
}

using HardeningTest = CoordinatorTest;

// Defect 1: std::regex recursed over every host-span name (a 40,000-character name overflowed
// the stack and killed the daemon) and backtracked exponentially (`^(a|a)*$` on 31 characters
// burnt a core for good). Patterns now run on RE2, bounded, with a 400 for a bad one.
TEST_F(HardeningTest, StepPatternsCannotCrashOrStallTheCoordinator) {
  StartDaemon();
  const HttpResult imported =
      HttpCall(port_, "POST", "/v1/captures:import?capture=names&name=r.json",
               HostSpanTrace({std::string(40'000, 'a'), std::string(30, 'a') + "b", "train_step_7", "train_step_8"}),
               "application/json");
  ASSERT_EQ(imported.status, 201) << imported.body;

  const HttpResult overflow = HttpCall(port_, "GET", "/v1/captures/names/steps?step_pattern=" + UrlEncode("(a|b)*c"));
  EXPECT_EQ(overflow.status, 200) << overflow.body;
  const HttpResult backtrack = HttpCall(port_, "GET", "/v1/captures/names/steps?step_pattern=" + UrlEncode("^(a|a)*$"));
  EXPECT_EQ(backtrack.status, 200) << backtrack.body;
  // The pattern still finds steps, numbered by its last group of digits.
  const HttpResult steps = HttpCall(port_, "GET", "/v1/captures/names/steps?step_pattern=" + UrlEncode(R"(train_step_(\d+))"));
  ASSERT_EQ(steps.status, 200) << steps.body;
  EXPECT_NE(steps.body.find("\"step_source\":\"pattern\""), std::string::npos) << steps.body;
  EXPECT_NE(steps.body.find("\"step\":7,"), std::string::npos) << steps.body;
  EXPECT_NE(steps.body.find("\"step\":8,"), std::string::npos) << steps.body;

  auto expect_400 = [&](const std::string& pattern, const std::string& detail) {
    HttpResult r = HttpCall(port_, "GET", "/v1/captures/names/steps?step_pattern=" + UrlEncode(pattern));
    EXPECT_EQ(r.status, 400) << pattern << ": " << r.body;
    EXPECT_EQ(r.headers["content-type"], "application/problem+json");
    EXPECT_NE(r.body.find(detail), std::string::npos) << r.body;
  };
  expect_400("([", "is not a valid regex (RE2 syntax)");
  expect_400(R"((a)\1)", "is not a valid regex (RE2 syntax)");
  expect_400(std::string(600, 'a'), "at most 512");
  expect_400("((a{100}){100}){100}", "is not a valid regex");
  EXPECT_EQ(HttpCall(port_, "GET", "/healthz").status, 200);
  EXPECT_EQ(daemon_->Terminate(), 0) << "the coordinator must still be running and stop cleanly";
}

// Peak resident memory of a process (VmHWM), in bytes; 0 when unreadable.
uint64_t PeakRssBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

// Defect 3: a 1 MiB gzip upload that inflates to 1 GiB was inflated whole (peak 5.3 GB). Now
// inflating streams from the staged file and stops at the bound: 413 with the reason, and the
// coordinator's memory stays far below what the bomb would take.
TEST_F(HardeningTest, ADecompressionBombIsRefusedWithinItsBound) {
  StartDaemon();
  // 64 gzip members of 16 MiB of zeros each: ~1 MiB on the wire, 1 GiB inflated.
  std::string bomb;
  {
    const std::string zeros = *common::GzipCompress(std::string(16 << 20, '\0'), 9);
    for (int i = 0; i < 64; ++i) bomb += zeros;
  }
  const HttpResult refused =
      HttpCall(port_, "POST", "/v1/captures:import?capture=bomb&name=bomb.json.gz", bomb, "application/gzip");
  EXPECT_EQ(refused.status, 413) << refused.body;
  EXPECT_NE(refused.body.find("bomb.json.gz: inflates to more than 200 times its compressed size"), std::string::npos)
      << refused.body;
  const uint64_t peak = PeakRssBytes(daemon_->pid());
  ASSERT_GT(peak, 0u);
  EXPECT_LT(peak, 600u << 20) << "inflating the bomb whole would take over 1 GiB";
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/bomb").status, 404);
  ASSERT_EQ(Import("after", 0).status, 201) << "the coordinator carries on";

  // The absolute bound, configurable, holds for gzip and plain uploads alike.
  daemon_->Terminate();
  std::ofstream(dir_.File("small.json")) << R"({"limits": {"max_document_bytes": 1000000}})";
  StartDaemon({"--config", dir_.File("small.json")});
  const std::string big = FileBytes(KinetoFixture("trace_filter/sampled_rank-0.json.gz"));  // 1.76 MB inflated
  const HttpResult gz = HttpCall(port_, "POST", "/v1/captures:import?capture=big&name=r.json.gz", big, "application/gzip");
  EXPECT_EQ(gz.status, 413) << gz.body;
  EXPECT_NE(gz.body.find("decompressed size exceeds the limit of 1000000 bytes"), std::string::npos) << gz.body;
  const HttpResult plain = HttpCall(port_, "POST", "/v1/captures:import?capture=big&name=r.json",
                                    R"({"traceEvents": [)" + std::string(1'100'000, ' ') + "]}", "application/json");
  EXPECT_EQ(plain.status, 413) << plain.body;
  EXPECT_NE(plain.body.find("exceeds the limit of 1000000 bytes"), std::string::npos) << plain.body;
}

// A config key nobody reads is a typo: the daemon refuses to start and names it.
TEST_F(HardeningTest, AnUnknownConfigKeyIsNamed) {
  std::ofstream(dir_.File("typo.json")) << R"({"limits": {"max_body_byts": 1000}})";
  Daemon daemon(PODSCOPE_COORDINATOR_PATH,
                {"--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--data-dir", dir_.File("store"), "--config",
                 dir_.File("typo.json")},
                dir_.File("typo.log"));
  EXPECT_NE(daemon.WaitForLog("unknown key \"limits.max_body_byts\""), "") << daemon.Log();
}

// Defect 6: a DELETE during an import answered 204, then the import answered 201 and wrote a
// record naming workers whose events the delete had removed. Imports, deletes and retention are
// now one serialised state machine. Two clients add ranks to one capture while a third deletes
// it, round after round; every answer is one of the right ones, and after each round the stored
// record and the stored events agree exactly.
TEST_F(HardeningTest, ImportsAndDeletesInterleavedLeaveEveryRecordMatchingItsEvents) {
  const std::string bodies[2] = {FileBytes(KinetoFixture("trace_filter/sampled_rank-0.json.gz")),
                                 FileBytes(KinetoFixture("trace_filter/sampled_rank-1.json.gz"))};
  int imports = 0, deletes = 0;
  for (int round = 0; round < 8; ++round) {
    StartDaemon();
    std::vector<std::future<std::pair<int, int>>> clients;
    for (int rank = 0; rank < 2; ++rank) {
      clients.push_back(std::async(std::launch::async, [&, rank] {
        int created = 0;
        for (int i = 0; i < 10; ++i) {
          const HttpResult r = HttpCall(port_, "POST", "/v1/captures:import?capture=race&name=r.json.gz",
                                        bodies[rank], "application/gzip");
          if (r.status == 201) {
            ++created;
            EXPECT_NE(r.body.find("\"rank\":" + std::to_string(rank) + ","), std::string::npos) << r.body;
          } else {
            // Its rank is there already, or the capture it was adding to was deleted meanwhile.
            EXPECT_EQ(r.status, 409) << r.body;
            EXPECT_TRUE(r.body.find("already has rank") != std::string::npos ||
                        r.body.find("was deleted while this file was being parsed") != std::string::npos)
                << r.body;
          }
        }
        return std::pair<int, int>{created, 0};
      }));
    }
    clients.push_back(std::async(std::launch::async, [&] {
      int deleted = 0;
      for (int i = 0; i < 20; ++i) {
        const HttpResult r = HttpCall(port_, "DELETE", "/v1/captures/race");
        EXPECT_TRUE(r.status == 204 || r.status == 404) << r.status << " " << r.body;
        deleted += r.status == 204;
      }
      return std::pair<int, int>{0, deleted};
    }));
    for (auto& c : clients) {
      const auto [created, deleted] = c.get();
      imports += created;
      deletes += deleted;
    }
    ASSERT_EQ(daemon_->Terminate(), 0);
    auto store = storage::RocksDbTraceStore::Open({.path = dir_.File("store")});
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<storage::CaptureRecord> record = (*store)->GetCapture("race");
    if (!record.ok()) {
      EXPECT_EQ((*store)->CountCaptureKeysForTesting("race"), 0u) << "no record, no events";
      continue;
    }
    EXPECT_EQ(record->state, storage::CaptureState::kComplete);
    absl::StatusOr<common::Capture> loaded = storage::LoadCapture(**store, "race");
    ASSERT_TRUE(loaded.ok()) << "round " << round << ": " << loaded.status();
    ASSERT_EQ(loaded->workers.size(), record->workers.size());
    uint64_t events = 0;
    for (size_t w = 0; w < loaded->workers.size(); ++w) {
      EXPECT_EQ(loaded->workers[w].info.rank, record->workers[w].rank);
      EXPECT_EQ(loaded->workers[w].Counts().Total(), record->workers[w].events);
      events += loaded->workers[w].Counts().Total();
    }
    EXPECT_EQ(events, record->events);
    EXPECT_EQ((*store)->CountCaptureKeysForTesting("race"), record->workers.size()) << "one chunk per worker, no more";
  }
  EXPECT_GT(imports, 0);
  EXPECT_GT(deletes, 0);
}

}  // namespace
}  // namespace podscope::testing
