// Regression tests for the defects an adversarial run against the real coordinator found
//: each one crashed, stalled or corrupted the daemon before its fix.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/file_io.h"
#include "common/parse_number.h"
#include "http/http_client.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/daemon.h"
#include "tests/integration/raw_client.h"
#include "tests/sanitizers.h"
#include "tests/test_paths.h"
#include "tests/wait_for.h"

namespace podscope::testing {
namespace {

// A Kineto trace whose host spans have the given names, 5 us each, with a 2 us kernel inside each.
std::string HostSpanTrace(const std::vector<std::string>& names) {
  std::string json = R"({"traceEvents": [)";
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string ts = std::to_string(10 * (i + 1));
    if (i > 0) json += ",";
    json +=
        R"({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "name": ")" + names[i] +
        R"(", "ts": )" + ts +
        R"(, "dur": 5}, {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": )" +
        ts + R"(.5, "dur": 2, "args": {"device": 0, "stream": 7}})";
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
               HostSpanTrace({std::string(40'000, 'a'), std::string(30, 'a') + "b", "train_step_7",
                              "train_step_8"}),
               "application/json");
  ASSERT_EQ(imported.status, 201) << imported.body;

  const HttpResult overflow =
      HttpCall(port_, "GET", "/v1/captures/names/steps?step_pattern=" + http::UrlEncode("(a|b)*c"));
  EXPECT_EQ(overflow.status, 200) << overflow.body;
  const HttpResult backtrack = HttpCall(
      port_, "GET", "/v1/captures/names/steps?step_pattern=" + http::UrlEncode("^(a|a)*$"));
  EXPECT_EQ(backtrack.status, 200) << backtrack.body;
  // The pattern still finds steps, numbered by its last group of digits.
  const HttpResult steps =
      HttpCall(port_, "GET",
               "/v1/captures/names/steps?step_pattern=" + http::UrlEncode(R"(train_step_(\d+))"));
  ASSERT_EQ(steps.status, 200) << steps.body;
  EXPECT_NE(steps.body.find("\"step_source\":\"pattern\""), std::string::npos) << steps.body;
  EXPECT_NE(steps.body.find("\"step\":7,"), std::string::npos) << steps.body;
  EXPECT_NE(steps.body.find("\"step\":8,"), std::string::npos) << steps.body;

  auto expect_400 = [&](const std::string& pattern, const std::string& detail) {
    HttpResult r =
        HttpCall(port_, "GET", "/v1/captures/names/steps?step_pattern=" + http::UrlEncode(pattern));
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

// Under AddressSanitizer the coordinator's peak also holds ASan's quarantine of freed blocks
// (256 MiB by default) and the shadow of what is live: its peak there was 400.2 and 400.5 MiB in
// two runs of three, so its bound is looser, still far below the 1 GiB a whole inflation takes.
#if defined(PODSCOPE_UNDER_ASAN)
constexpr uint64_t kBombPeakBound = 480u << 20;
#else
constexpr uint64_t kBombPeakBound = 400u << 20;
#endif

// Defect 3: a 1 MiB gzip upload that inflates to 1 GiB was inflated whole (peak 5.3 GB). Now
// inflating streams from the staged file and stops at the bound: 413 with the reason, and the
// coordinator's memory stays far below what the bomb would take.
TEST_F(HardeningTest, ADecompressionBombIsRefusedWithinItsBound) {
  // A ratio below the default (200) keeps the bound, and so the peak, small under ASan too.
  std::ofstream(dir_.File("ratio.json")) << R"({"limits": {"max_inflate_ratio": 20}})";
  StartDaemon({"--config", dir_.File("ratio.json")});
  // A trace's opening, then 64 gzip members of 16 MiB of zeros each: ~1 MiB on the wire, 1 GiB
  // inflated. (Without the opening the importer, which reads as it inflates, would refuse the
  // first bytes as no JSON object, long before the bound.)
  std::string bomb = *common::GzipCompress(R"({"traceEvents": [)");
  {
    const std::string zeros = *common::GzipCompress(std::string(16 << 20, '\0'), 9);
    for (int i = 0; i < 64; ++i) bomb += zeros;
  }
  const HttpResult refused =
      HttpCall(port_, "POST", "/v1/captures:import?capture=bomb&name=bomb.json.gz", bomb,
               "application/gzip");
  EXPECT_EQ(refused.status, 413) << refused.body;
  EXPECT_NE(refused.body.find("bomb.json.gz: inflates to more than 20 times its compressed size"),
            std::string::npos)
      << refused.body;
  const uint64_t peak = PeakRssBytes(daemon_->pid());
  ASSERT_GT(peak, 0u);
  EXPECT_LT(peak, kBombPeakBound) << "inflating the bomb whole would take over 1 GiB";
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/bomb").status, 404);
  ASSERT_EQ(Import("after", 0).status, 201) << "the coordinator carries on";

  // The absolute bound, configurable, holds for gzip and plain uploads alike.
  daemon_->Terminate();
  std::ofstream(dir_.File("small.json")) << R"({"limits": {"max_document_bytes": 1000000}})";
  StartDaemon({"--config", dir_.File("small.json")});
  const std::string big =
      FileBytes(KinetoFixture("trace_filter/sampled_rank-0.json.gz"));  // 1.76 MB inflated
  const HttpResult gz = HttpCall(port_, "POST", "/v1/captures:import?capture=big&name=r.json.gz",
                                 big, "application/gzip");
  EXPECT_EQ(gz.status, 413) << gz.body;
  EXPECT_NE(gz.body.find("decompressed size exceeds the limit of 1000000 bytes"), std::string::npos)
      << gz.body;
  const HttpResult plain =
      HttpCall(port_, "POST", "/v1/captures:import?capture=big&name=r.json",
               R"({"traceEvents": [)" + std::string(1'100'000, ' ') + "]}", "application/json");
  EXPECT_EQ(plain.status, 413) << plain.body;
  EXPECT_NE(plain.body.find("exceeds the limit of 1000000 bytes"), std::string::npos) << plain.body;
}

// A config key nobody reads is a typo: the daemon refuses to start and names it.
TEST_F(HardeningTest, AnUnknownConfigKeyIsNamed) {
  std::ofstream(dir_.File("typo.json")) << R"({"limits": {"max_body_byts": 1000}})";
  Daemon daemon(CoordinatorBinary(),
                {"--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--data-dir", dir_.File("store"),
                 "--config", dir_.File("typo.json")},
                dir_.File("typo.log"));
  EXPECT_NE(
      daemon.WaitForLog(
          "unknown key \"limits.max_body_byts\" \\(did you mean \"max_body_bytes\"\\? known: "),
      "")
      << daemon.Log();
  EXPECT_EQ(daemon.WaitForExit(), 2) << "a wrong config is a usage error";
  // The agent's config is checked the same way.
  std::ofstream(dir_.File("agent-typo.json")) << R"({"coordinatr": "127.0.0.1:1"})";
  Daemon agent(AgentBinary(), {"--config", dir_.File("agent-typo.json")},
               dir_.File("agent-typo.log"));
  EXPECT_NE(agent.WaitForLog("unknown key \"coordinatr\" \\(did you mean \"coordinator\"\\?"), "")
      << agent.Log();
  // Values out of range or of the wrong type name their key and range (they were Boost's words,
  // "not exact", and 0 passed).
  std::ofstream(dir_.File("range.json")) << R"({"agents": {"heartbeat_interval_ms": -5}})";
  Daemon ranged(CoordinatorBinary(),
                {"--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--data-dir",
                 dir_.File("store2"), "--config", dir_.File("range.json")},
                dir_.File("range.log"));
  EXPECT_NE(ranged.WaitForLog("agents.heartbeat_interval_ms: -5 is not in 10..3600000"), "")
      << ranged.Log();
  EXPECT_EQ(ranged.WaitForExit(), 2);
  std::ofstream(dir_.File("agent-range.json")) << R"({"clock_burst": "x"})";
  Daemon agent_ranged(AgentBinary(), {"--config", dir_.File("agent-range.json")},
                      dir_.File("agent-range.log"));
  EXPECT_NE(agent_ranged.WaitForLog("clock_burst: \"x\" is not an integer in 1..1000"), "")
      << agent_ranged.Log();
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
          const HttpResult r =
              HttpCall(port_, "POST", "/v1/captures:import?capture=race&name=r.json.gz",
                       bodies[rank], "application/gzip");
          if (r.status == 201) {
            ++created;
            EXPECT_NE(r.body.find("\"rank\":" + std::to_string(rank) + ","), std::string::npos)
                << r.body;
          } else {
            // Its rank is there already, or the capture it was adding to was deleted meanwhile.
            EXPECT_EQ(r.status, 409) << r.body;
            EXPECT_TRUE(r.body.find("already has rank") != std::string::npos ||
                        r.body.find("was deleted while this file was being parsed") !=
                            std::string::npos)
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
    // Loaded by rank; the record lists its workers in the order they were stored.
    std::map<int32_t, uint64_t> recorded;  // rank -> events
    for (const storage::WorkerRecord& w : record->workers) recorded[w.rank] = w.events;
    ASSERT_EQ(recorded.size(), record->workers.size());
    for (const common::WorkerTrace& w : loaded->workers) {
      ASSERT_TRUE(recorded.contains(w.info.rank)) << "rank " << w.info.rank;
      EXPECT_EQ(w.Counts().Total(), recorded[w.info.rank]);
      events += w.Counts().Total();
    }
    EXPECT_EQ(events, record->events);
    EXPECT_EQ((*store)->CountCaptureKeysForTesting("race"), record->workers.size())
        << "one chunk per worker, no more";
  }
  EXPECT_GT(imports, 0);
  EXPECT_GT(deletes, 0);
}

// Defect 4: 512 global slots and no per-client bound let 520 slow clients shut everybody out,
// and refused clients got a reset. Each client address now has its own bound, a refused client
// gets a 503 it can read, and refusals are counted.
TEST_F(HardeningTest, ConnectionSlotsArePerClientAndRefusalsAre503) {
  std::ofstream(dir_.File("slots.json"))
      << R"({"limits": {"max_connections": 8, "max_connections_per_client": 3}})";
  StartDaemon({"--config", dir_.File("slots.json")});
  std::vector<RawHttp> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(HttpConnectFrom("127.0.0.2", port_));
  for (const RawHttp& fd : idle) ASSERT_NE(fd, nullptr);
  // Another connection of the same client is refused, readably...
  RawHttp fourth = HttpConnectFrom("127.0.0.2", port_);
  ASSERT_NE(fourth, nullptr);
  const std::string refused = ReadUntilClosed(fourth);
  fourth.reset();
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused;
  EXPECT_NE(refused.find("application/problem+json"), std::string::npos) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos) << refused;
  EXPECT_NE(refused.find("this client holds its limit of 3 connections"), std::string::npos)
      << refused;
  // ...while every other client is served.
  EXPECT_EQ(HttpCall(port_, "GET", "/healthz").status, 200);
  EXPECT_EQ(Metric(port_, R"(podscope_http_rejected_connections_total{reason="client_full"})"),
            "1");
  // Past the global bound (3 + 5 = 8 open), once every connection has made an authorized request
  // (until then the oldest would make room: see StalledHandshakes in tests/abuse/), a new client
  // is refused too, naming the server.
  for (const char* source : {"127.0.0.3", "127.0.0.3", "127.0.0.3", "127.0.0.4", "127.0.0.4"}) {
    idle.push_back(HttpConnectFrom(source, port_));
    ASSERT_NE(idle.back(), nullptr);
  }
  // (Answered: the request was admitted, so its connection counts as authenticated. No other
  // connection may be opened meanwhile: it would make one of them give way.)
  for (const RawHttp& c : idle) {
    ASSERT_TRUE(
        SendAll(c, "GET /v1/captures HTTP/1.1\r\nHost: podscope\r\n" + AuthHeader(port_) + "\r\n"));
    ASSERT_TRUE(PeerSpoke(c, 30'000));
  }
  RawHttp over = HttpConnectFrom("127.0.0.5", port_);
  const std::string full = ReadUntilClosed(over);
  over.reset();
  EXPECT_NE(full.find("the server holds its limit of 8 connections"), std::string::npos) << full;
  idle.clear();
  EXPECT_NE(daemon_->WaitForLog("refused a connection from 127.0.0.2: this client holds its limit"),
            "");
}

// Defect 4: one long deadline let an upload body or a response idle for 600 s. Every phase now
// has to keep moving: the header arrives whole within header_timeout_seconds, a body brings at
// least min_progress_bytes every progress_interval_seconds, and so does a response's reader.
TEST_F(HardeningTest, SlowHeadersBodiesAndReadersAreDropped) {
  std::ofstream(dir_.File("slow.json"))
      << R"({"limits": {"header_timeout_seconds": 1, "progress_interval_seconds": 1, "min_progress_bytes": 4096}})";
  StartDaemon({"--config", dir_.File("slow.json")});
  // A capture whose export (~8 MB) is more than the kernel's socket buffers hold (4 MB).
  const std::string rank0 = FileBytes(KinetoFixture("trace_filter/sampled_rank-0.json.gz"));
  for (int rank = 0; rank < 6; ++rank) {
    ASSERT_EQ(
        HttpCall(port_, "POST", "/v1/captures:import?capture=big&rank=" + std::to_string(rank),
                 rank0, "application/gzip")
            .status,
        201);
  }
  // A slowloris header: one byte at a time, never finished. Dropped (no answer), not served.
  RawHttp header = HttpConnectFrom("127.0.0.2", port_);
  const std::string head = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  for (size_t i = 0; i < head.size() && !PeerSpoke(header, 200); ++i)
    SendAll(header, head.substr(i, 1));
  EXPECT_EQ(ReadUntilClosed(header), "");
  header.reset();
  // A trickled body: declared 100 kB, 64 bytes at a time.
  RawHttp body = HttpConnectFrom("127.0.0.2", port_);
  SendAll(body,
          "POST /v1/captures:import?capture=slow HTTP/1.1\r\nHost: x\r\nContent-Type: "
          "application/json\r\n" +
              AuthHeader(port_) + "Content-Length: 100000\r\n\r\n");
  while (!PeerSpoke(body, 200)) {
    if (!SendAll(body, std::string(64, ' '))) break;
  }
  ReadUntilClosed(body);
  body.reset();
  // A reader that never reads its trace export, with a tiny receive window.
  RawHttp reader = HttpConnectFrom("127.0.0.2", port_, /*receive_buffer=*/4096);
  SendAll(reader,
          "GET /v1/captures/big/trace HTTP/1.1\r\nHost: x\r\n" + AuthHeader(port_) + "\r\n");
  testing::WaitFor(
      [&] { return Metric(port_, R"(podscope_http_timeouts_total{phase="response"})") == "1"; });
  reader.reset();
  EXPECT_EQ(Metric(port_, R"(podscope_http_timeouts_total{phase="header"})"), "1");
  EXPECT_EQ(Metric(port_, R"(podscope_http_timeouts_total{phase="body"})"), "1");
  EXPECT_EQ(Metric(port_, R"(podscope_http_timeouts_total{phase="response"})"), "1");
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/slow").status, 404);
  EXPECT_EQ(HttpCall(port_, "GET", "/healthz").status, 200);
}

// Defect 10: header-stage errors closed the connection without a word, a 413 reset the
// connection under its own response, and several small inputs went unchecked.
TEST_F(HardeningTest, MalformedRequestsAndSmallInputsGetClearAnswers) {
  std::ofstream(dir_.File("small.json"))
      << R"({"limits": {"max_upload_bytes": 200000, "max_header_bytes": 4096}})";
  StartDaemon({"--config", dir_.File("small.json")});
  auto status_line = [](const std::string& raw) { return raw.substr(0, raw.find("\r\n")); };
  const std::string long_header = RawExchange(
      port_, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(8000, 'a') + "\r\n\r\n");
  EXPECT_EQ(status_line(long_header), "HTTP/1.1 431 Request Header Fields Too Large")
      << long_header;
  EXPECT_NE(long_header.find("request headers are limited to 4096 bytes"), std::string::npos);
  EXPECT_EQ(status_line(RawExchange(port_, "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n")),
            "HTTP/1.1 400 Bad Request");
  const std::string smuggled = RawExchange(port_,
                                           "POST /v1/captures HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                           "application/json\r\nContent-Length: 4\r\n"
                                           "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  EXPECT_EQ(status_line(smuggled), "HTTP/1.1 400 Bad Request") << smuggled;
  EXPECT_NE(daemon_->WaitForLog("malformed request from 127.0.0.1"), "");

  // A 413 is read by a client that sends its whole (8 MB) body regardless.
  const std::string huge(8 << 20, ' ');
  const std::string too_large =
      RawExchange(port_,
                  "POST /v1/captures:import?capture=x HTTP/1.1\r\nHost: x\r\n"
                  "Content-Type: application/json\r\nContent-Length: " +
                      std::to_string(huge.size()) + "\r\n\r\n" + huge);
  EXPECT_EQ(status_line(too_large), "HTTP/1.1 413 Payload Too Large") << status_line(too_large);

  auto expect = [&](HttpResult r, int status, const std::string& detail) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_NE(r.body.find(detail), std::string::npos) << r.body;
  };
  ASSERT_EQ(Import("good", 0).status, 201);
  expect(HttpCall(port_, "GET", "/v1/captures/good/allreduce?link_gbytes_per_s=nan"), 400,
         "finite");
  expect(HttpCall(port_, "GET", "/v1/captures/good/allreduce?link_gbytes_per_s=inf"), 400,
         "finite");
  // The old name, in Gbit/s: refused, saying what it became, not read in the wrong unit.
  expect(HttpCall(port_, "GET", "/v1/captures/good/allreduce?link_gbps=400"), 400,
         "link_gbps (Gbit/s) is now link_gbytes_per_s, in GB/s");
  expect(HttpCall(port_, "POST", "/v1/captures", R"({"job": "a", "job": "b", "duration_ms": 100})",
                  "application/json"),
         400, "appears twice in one object");
  // Content types a cross-site form (or a no-CORS fetch) can send do not start or import.
  expect(
      HttpCall(port_, "POST", "/v1/captures", R"({"job": "a", "duration_ms": 100})", "text/plain"),
      415, "application/json");
  expect(HttpCall(port_, "POST", "/v1/captures", "job=a", "application/x-www-form-urlencoded"), 415,
         "application/json");
  expect(HttpCall(port_, "POST", "/v1/captures:import?capture=y", "{}", ""), 415,
         "without a Content-Type");
  // Job names are printable and bounded: nothing reaches a terminal that could drive it.
  const std::string trace = FileBytes(KinetoFixture("trace_filter/sampled_rank-0.json.gz"));
  expect(HttpCall(port_, "POST", "/v1/captures:import?capture=j&job=" + std::string(200, 'j'),
                  trace, "application/gzip"),
         400, "job must be 1-128 characters");
  expect(HttpCall(port_, "POST", "/v1/captures:import?capture=j&job=a%1B%5B2Jb", trace,
                  "application/gzip"),
         400, "printable ASCII");
  expect(
      HttpCall(port_, "POST", "/v1/captures:import?capture=j&job=a%0Ab", trace, "application/gzip"),
      400, "printable ASCII");
  expect(HttpCall(port_, "POST", "/v1/captures",
                  "{\"job\": \"a\\u001b[31m\", \"duration_ms\": 100}", "application/json"),
         400, "printable ASCII");
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/j").status, 404);
  // Deletes are logged with the client that asked.
  EXPECT_EQ(HttpCall(port_, "DELETE", "/v1/captures/good").status, 204);
  EXPECT_NE(
      daemon_->WaitForLog(
          "deleted capture good \\(job 'tf', 1 workers, [0-9]+ events\\) for 127\\.0\\.0\\.1:"),
      "");
}

// Defect 9: the analysis cache was keyed by the raw query string and never bounded (400
// distinct step_pattern values added 151 MB that retention never reclaimed). Keys are now
// normalised, the cache is bounded by bytes (least recently used out first), and its bytes
// count in the capture's stored bytes, which retention goes by.
TEST_F(HardeningTest, TheAnalysisCacheIsNormalisedBoundedAndCounted) {
  std::ofstream(dir_.File("cache.json")) << R"({"limits": {"max_analysis_cache_bytes": 20000}})";
  StartDaemon({"--config", dir_.File("cache.json")});
  const HttpResult imported = Import("c", 0);
  ASSERT_EQ(imported.status, 201);
  const size_t at = imported.body.find("\"stored_bytes\":");
  ASSERT_NE(at, std::string::npos) << imported.body;
  const uint64_t event_bytes = static_cast<uint64_t>(
      common::ParseInt(
          imported.body.substr(at + 15,
                               imported.body.find_first_not_of("0123456789", at + 15) - (at + 15)))
          .value());
  // One request written three ways is one entry.
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/c/steps").headers["x-podscope-cache"], "miss");
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/c/steps?window=steps").headers["x-podscope-cache"],
            "hit");
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/c/steps?format=json&clocks=auto&window=steps")
                .headers["x-podscope-cache"],
            "hit");
  // Forty distinct patterns: far more than the bound holds.
  for (int i = 0; i < 40; ++i) {
    ASSERT_EQ(HttpCall(port_, "GET",
                       "/v1/captures/c/steps?step_pattern=" +
                           http::UrlEncode("^x" + std::to_string(i) + "$"))
                  .status,
              200);
  }
  ASSERT_EQ(daemon_->Terminate(), 0);
  auto store = storage::RocksDbTraceStore::Open({.path = dir_.File("store")});
  ASSERT_TRUE(store.ok()) << store.status();
  uint64_t cached = 0;
  size_t entries = 0;
  ASSERT_TRUE((*store)
                  ->ForEachAnalysis([&](std::string_view, std::string_view, uint64_t bytes) {
                    cached += bytes;
                    ++entries;
                  })
                  .ok());
  EXPECT_LE(cached, 20000u);
  EXPECT_GT(entries, 1u);
  EXPECT_LT(entries, 41u);
  absl::StatusOr<storage::CaptureRecord> record = (*store)->GetCapture("c");
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->stored_bytes, event_bytes + cached) << "retention sees the cache's bytes";
}

// Defect 9: /v1/workers answered every agent and worker at once (36 MB for 50 agents x 4,096
// workers). It is paged by whole agents, and each agent's list is bounded.
TEST_F(HardeningTest, TheWorkersListIsPaged) {
  StartDaemon();
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/workers?limit=0").status, 400);
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/workers?limit=10001").status, 400);
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/workers?limit=x").status, 400);
  const HttpResult empty = HttpCall(port_, "GET", "/v1/workers?limit=5");
  EXPECT_EQ(empty.status, 200);
  EXPECT_EQ(empty.body.find("\"next\""), std::string::npos) << empty.body;
}

// Defect 8: 2,000 idle HTTP/2 connections to the agents' port were accepted and kept. A gRPC
// connection with no call open is now closed after agents.max_idle_connection_ms (agents
// always hold their control stream open).
TEST_F(HardeningTest, IdleGrpcConnectionsAreClosed) {
  std::ofstream(dir_.File("idle.json")) << R"({"agents": {"max_idle_connection_ms": 300}})";
  StartDaemon({"--config", dir_.File("idle.json")});
  const int grpc_port = static_cast<int>(
      common::ParseInt(daemon_->WaitForLog("agents on grpc://[^:]+:([0-9]+)")).value());
  // An HTTP/2 client preface and an empty SETTINGS frame: a connection, and nothing more.
  const std::string preface =
      std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string("\0\0\0\x04\0\0\0\0\0", 9);
  // Over mutual TLS with a valid agent certificate: the connection is whole, it just never calls.
  // (From four addresses: one address may hold 16 connections that have made no call.)
  std::vector<RawHttp> idle;
  for (int i = 0; i < 20; ++i) {
    const std::string source = "127.0.0." + std::to_string(2 + i % 4);
    idle.push_back(AgentTlsConnectFrom(source.c_str(), grpc_port, "idler"));
    ASSERT_NE(idle.back(), nullptr);
    ASSERT_TRUE(SendAll(idle.back(), preface));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (const RawHttp& c : idle) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    EXPECT_TRUE(ClosedByPeer(c->fd(), static_cast<int>(std::max<int64_t>(left.count(), 1))))
        << "an idle gRPC connection stayed open";
  }
}

// Defect 8: gRPC took every connection offered. The coordinator now accepts the agents'
// connections itself, bounded in all and per client address, and hands them to gRPC; a real
// agent from another address still connects.
TEST_F(HardeningTest, GrpcConnectionsAreCappedPerClient) {
  std::ofstream(dir_.File("cap.json")) << R"({"agents": {"max_connections_per_client": 5}})";
  StartDaemon({"--config", dir_.File("cap.json")});
  const int grpc_port = static_cast<int>(
      common::ParseInt(daemon_->WaitForLog("agents on grpc://[^:]+:([0-9]+)")).value());
  const std::string preface =
      std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string("\0\0\0\x04\0\0\0\0\0", 9);
  // Five are served: their TLS handshake completes and gRPC answers the preface (and keeps them,
  // idle, for max_idle_connection_ms: 30 s). Fifteen are closed before the handshake.
  std::vector<RawHttp> flood;
  int served = 0, closed = 0;
  for (int i = 0; i < 20; ++i) {
    RawHttp c = AgentTlsConnectFrom("127.0.0.2", grpc_port, "flooder");
    if (c == nullptr) {
      ++closed;
      continue;
    }
    SendAll(c, preface);
    if (FirstReply(c->fd(), 10'000) == PeerReply::kData) ++served;
    flood.push_back(std::move(c));
  }
  EXPECT_EQ(served, 5);
  EXPECT_EQ(closed, 15);
  const std::string metrics = HttpCall(port_, "GET", "/metrics").body;
  EXPECT_NE(metrics.find("podscope_grpc_rejected_connections_total{reason=\"client_full\"} 15\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(
      daemon_->WaitForLog(
          "grpc: refused a connection from 127.0.0.2: that address holds its 5 agent connections"),
      "");
  Daemon agent(AgentBinary(),
               Concat({"--coordinator", "127.0.0.1:" + std::to_string(grpc_port), "--agent-id",
                       "a1", "--simulate", "ranks=0-1,world=2,job=capped,profile=light"},
                      TestSecurity::Get().AgentFlags("a1")),
               dir_.File("agent.log"));
  EXPECT_NE(daemon_->WaitForLog("agent a1 connected from"), "");
}

// Defect 8: at the descriptor limit the REST accept loop spun at 93% CPU. It now sheds the
// pending connection with its reserve descriptor and backs off, and serves again once
// descriptors come back.
TEST_F(HardeningTest, RunningOutOfDescriptorsDoesNotSpinTheAcceptLoop) {
#if defined(PODSCOPE_UNDER_ASAN)
  // UBSan's own checks open descriptors (to probe memory): at the limit they fail and report a
  // bogus "invalid vptr" in the daemon. The unsanitized suite runs this test.
  GTEST_SKIP()
      << "runs in the unsanitized build only: the sanitizers need descriptors of their own";
#endif
  std::ofstream(dir_.File("fds.json")) << R"({"limits": {"max_connections_per_client": 1000}})";
  const std::vector<std::string> args =
      Concat({"--nofile=64:64", CoordinatorBinary(), "--http", "127.0.0.1:0", "--grpc",
              "127.0.0.1:0", "--data-dir", dir_.File("store"), "--config", dir_.File("fds.json")},
             TestSecurity::Get().CoordinatorFlags());
  daemon_ = std::make_unique<Daemon>("/usr/bin/prlimit", args, dir_.File("fds.log"));
  port_ = daemon_->WaitForPort();
  ASSERT_GT(port_, 0) << daemon_->Log();
  // Plain TCP connections (no handshake: the server has no descriptor to take them with).
  std::vector<int> flood;
  for (int i = 0; i < 80; ++i)
    flood.push_back(ConnectFrom("127.0.0.2", port_));  // the kernel completes them all
  ASSERT_NE(daemon_->WaitForLog("cannot accept \\(Too many open files\\)"), "") << daemon_->Log();
  const double before = CpuSeconds(daemon_->pid());
  const auto start = std::chrono::steady_clock::now();
  // Measuring CPU over a window, not waiting for an event: not a timing assertion.
  std::this_thread::sleep_for(std::chrono::seconds(2));  // not a timing assertion
  const double used = CpuSeconds(daemon_->pid()) - before;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(used / wall, 0.25) << "the accept loop spins: " << used << " CPU s in " << wall << " s";
  for (const int fd : flood) {
    if (fd >= 0) close(fd);
  }
  // Descriptors come back as the server sees the flood close; until then a request may be shed.
  HttpResult health;
  testing::WaitFor([&] {
    health = HttpCall(port_, "GET", "/healthz");
    return health.status == 200;
  });
  EXPECT_EQ(health.status, 200);
  EXPECT_NE(Metric(port_, R"(podscope_http_rejected_connections_total{reason="no_descriptors"})"),
            "0");
}

// Defect 5: GET /trace built the whole export in memory (865 MB for 10 M events), and four
// clients that never read held 3.6 GB. Exports now stream from the store in pieces at the
// client's pace: a client that reads nothing pins about a megabyte, not the export.
TEST_F(HardeningTest, ExportsStreamAndReadersThatStopPinLittle) {
  ASSERT_EQ(std::system((CliBinary() + " simulate --ranks 1 --steps 400 --plain-json -o " +
                         dir_.File("big") + " >/dev/null 2>&1")
                            .c_str()),
            0);
  StartDaemon();
  ASSERT_EQ(HttpCall(port_, "POST", "/v1/captures:import?capture=big&name=r.json",
                     FileBytes(dir_.File("big/rank-0.json")), "application/json")
                .status,
            201);
  // The export, read whole, is chunked and complete.
  const HttpResult whole = HttpCall(port_, "GET", "/v1/captures/big/trace");
  ASSERT_EQ(whole.status, 200);
  EXPECT_EQ(whole.headers.at("transfer-encoding"), "chunked");
  EXPECT_TRUE(whole.complete);
  const uint64_t export_bytes = whole.body.size();
  ASSERT_GT(export_bytes, 40u << 20);
  const uint64_t before = RssBytes(daemon_->pid());
  // Four clients ask for it and read nothing (tiny receive windows).
  std::vector<RawHttp> stalled;
  for (int i = 0; i < 4; ++i) {
    stalled.push_back(HttpConnectFrom("127.0.0.2", port_, /*receive_buffer=*/4096));
    ASSERT_TRUE(SendAll(stalled.back(), "GET /v1/captures/big/trace HTTP/1.1\r\nHost: x\r\n" +
                                            AuthHeader(port_) + "\r\n"));
  }
  // Each has its header and first piece once its producer ran; the rest waits on them.
  for (const RawHttp& c : stalled) {
    char first[256];
    ASSERT_GT(c->Receive(first, sizeof(first)), 0u);
  }
  uint64_t peak = 0;
  for (int i = 0; i < 20; ++i) {  // sampled while all four are stalled
    peak = std::max(peak, RssBytes(daemon_->pid()));
    std::this_thread::sleep_for(
        std::chrono::milliseconds(50));  // sampling memory; not a timing assertion
  }
  // Meanwhile the coordinator answers everyone else.
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures").status, 200);
  std::printf("[ figures  ] export %.1f MB; 4 stalled readers: RSS %.1f MB -> peak %.1f MB\n",
              export_bytes / 1e6, before / 1e6, peak / 1e6);
#if !defined(PODSCOPE_UNDER_ASAN)
  // Built whole, four exports would add 4 x export_bytes; streamed, the captures being exported
  // (two at a time) and a few pieces per connection.
  EXPECT_LT(peak - std::min(peak, before), export_bytes * 2)
      << "export " << export_bytes << " bytes";
#endif
  stalled.clear();
}

}  // namespace
}  // namespace podscope::testing
