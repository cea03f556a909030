// The real podscope-coordinator on port 0 with a temporary store: imports over HTTP, every
// analysis equal to `podscope analyze` on the same files, export, restart, delete, bad input.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/file_io.h"
#include "common/parse_number.h"
#include "storage/rocksdb_trace_store.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/daemon.h"
#include "tests/integration/raw_client.h"
#include "tests/test_paths.h"
#include "tests/wait_for.h"

namespace podscope::testing {
namespace {

std::string RunCli(const std::string& args) {
  FILE* pipe = popen((CliBinary() + " " + args + " 2>/dev/null").c_str(), "r");
  std::string out;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  pclose(pipe);
  return out;
}

TEST_F(CoordinatorTest, ImportAnalyseExportRestartDelete) {
  StartDaemon();
  EXPECT_EQ(HttpCall(port_, "GET", "/healthz").status, 200);
  EXPECT_EQ(HttpCall(port_, "GET", "/readyz").status, 200);
  const HttpResult first = Import("tf1", 0);
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(first.headers.at("location"), "/v1/captures/tf1");
  ASSERT_EQ(Import("tf1", 1).status, 201);

  // Every analysis equals the CLI's on the same files.
  const std::string files = KinetoFixture("trace_filter");
  std::map<std::string, std::string> served;
  for (const char* report :
       {"overview", "steps", "pod", "overlap", "communication", "stragglers", "allreduce",
        "kernels", "gpu", "operators", "memory", "input", "temporal"}) {
    const HttpResult r = HttpCall(port_, "GET", std::string("/v1/captures/tf1/") + report);
    ASSERT_EQ(r.status, 200) << report << ": " << r.body;
    EXPECT_EQ(r.body, RunCli(std::string("analyze --format json --report ") + report + " " + files))
        << report;
    served[report] = r.body;
  }
  const HttpResult hta = HttpCall(port_, "GET", "/v1/captures/tf1/temporal?window=hta");
  EXPECT_EQ(hta.body, RunCli("analyze --format json --report temporal --window hta " + files));
  EXPECT_NE(hta.body.find("\"idle_ns\":321378000"), std::string::npos);
  EXPECT_EQ(
      HttpCall(port_, "GET", "/v1/captures/tf1/temporal?window=hta").headers["x-podscope-cache"],
      "hit");

  const HttpResult trace = HttpCall(port_, "GET", "/v1/captures/tf1/trace");
  ASSERT_EQ(trace.status, 200);
  EXPECT_NE(trace.body.find("\"podscope\":{\"format\":1"), std::string::npos);
  EXPECT_NE(trace.body.find("rank 1 (pyper:trainer:0:1 pid 4045)"), std::string::npos);

  HttpResult gz = HttpCall(port_, "GET", "/v1/captures/tf1/trace?gzip=true");
  ASSERT_EQ(gz.status, 200);
  EXPECT_EQ(gz.headers["content-type"], "application/gzip");
  std::string unzipped;
  ASSERT_TRUE(common::Gunzip(gz.body, 1ull << 30, &unzipped).ok());
  EXPECT_EQ(unzipped, trace.body);

  const HttpResult metrics = HttpCall(port_, "GET", "/metrics");
  EXPECT_NE(metrics.body.find("podscope_captures{state=\"complete\"} 1"), std::string::npos)
      << metrics.body;

  // Restart: the same answers from disk.
  EXPECT_EQ(daemon_->Terminate(), 0);
  StartDaemon();
  for (const auto& [report, body] : served) {
    EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/tf1/" + report).body, body) << report;
  }
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/tf1").status, 200);

  // Delete: the record, events and cached analyses are gone.
  EXPECT_EQ(HttpCall(port_, "DELETE", "/v1/captures/tf1").status, 204);
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/tf1").status, 404);
  EXPECT_EQ(daemon_->Terminate(), 0);
  auto store = storage::RocksDbTraceStore::Open({.path = dir_.File("store")});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->CountCaptureKeysForTesting("tf1"), 0u);
}

TEST_F(CoordinatorTest, BadInputGetsProblemJsonAndLeavesTheStoreUnchanged) {
  std::ofstream(dir_.File("config.json"))
      << R"({"limits": {"max_upload_bytes": 200000, "max_body_bytes": 1000, "max_string_bytes": 4096}})";
  StartDaemon({"--config", dir_.File("config.json")});
  ASSERT_EQ(Import("good", 0).status, 201);
  ASSERT_EQ(CaptureCount(), 1u);
  auto expect_problem = [&](HttpResult r, int status, const std::string& detail) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(r.headers["content-type"], "application/problem+json") << r.body;
    EXPECT_NE(r.body.find(detail), std::string::npos) << r.body;
    EXPECT_EQ(CaptureCount(), 1u) << detail;
  };
  expect_problem(HttpCall(port_, "POST", "/v1/captures:import?capture=bad&name=rank-0.json",
                          "{\"traceEvents\": [", "application/json"),
                 400, "rank-0.json: byte offset");
  expect_problem(HttpCall(port_, "GET", "/v1/captures/unknown"), 404, "no capture");
  expect_problem(HttpCall(port_, "POST", "/v1/captures:import?capture=long&name=r.json",
                          R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": ")" +
                              std::string(5000, 'n') + R"(", "ts": 1, "dur": 1}]})",
                          "application/json"),
                 400, "exceeds the limit of 4096");
  expect_problem(HttpCall(port_, "GET", "/v1/captures/good/steps?window=sideways"), 400,
                 "window must be");
  expect_problem(HttpCall(port_, "GET", "/v1/captures/good/steps?bogus=1"), 400,
                 "unknown query parameter");
  expect_problem(HttpCall(port_, "GET", "/v1/captures/good/pod?detail=some"), 400,
                 "detail must be full or workers");
  expect_problem(HttpCall(port_, "GET", "/v1/captures?limit=0"), 400, "limit must be");
  expect_problem(HttpCall(port_, "GET", "/v1/captures/good/nonsense"), 404, "no report");
  expect_problem(HttpCall(port_, "POST", "/v1/captures:import?capture=big",
                          std::string(300000, ' '), "application/json"),
                 413, "uploads are limited to 200000 bytes");
  expect_problem(HttpCall(port_, "POST", "/v1/captures:import?capture=x", "a=b",
                          "application/x-www-form-urlencoded"),
                 415, "Unsupported Media Type");
  expect_problem(
      HttpCall(port_, "POST", "/v1/captures:import?capture=x&name=..%2F..%2Fetc%2Fpasswd", "{}",
               "application/json"),
      400, "plain file name");
  expect_problem(
      HttpCall(port_, "POST", "/v1/captures:import?capture=..", "{}", "application/json"), 400,
      "capture id");
  expect_problem(HttpCall(port_, "PUT", "/v1/captures/good"), 405, "not allowed");
  expect_problem(HttpCall(port_, "GET", "/v1/captures/good/steps?window=%zz"), 400,
                 "percent-encoding");
  // A truncated upload: the client promises more bytes than it sends, then hangs up.
  const std::string body = FileBytes(KinetoFixture("trace_filter/sampled_rank-1.json.gz"));
  const std::string truncated =
      "POST /v1/captures:import?capture=cut HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/gzip\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, body.size() / 2);
  RawExchange(port_, truncated);
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/cut").status, 404);
  EXPECT_EQ(CaptureCount(), 1u);
  // A malformed request line gets an error, and the daemon carries on.
  RawExchange(port_, "NOT HTTP AT ALL\r\n\r\n");
  EXPECT_EQ(HttpCall(port_, "GET", "/healthz").status, 200);
}

TEST_F(CoordinatorTest, CliOnlineModeImportsListsAndReportsLikeOffline) {
  StartDaemon();
  const std::string server = CliServerFlags(port_) + " ";
  const std::string imported =
      RunCli(server + "import " + KinetoFixture("dlrm_8rank") + " --job dlrm --capture d1");
  EXPECT_NE(imported.find("imported 8 files"), std::string::npos) << imported;
  const std::string listed = RunCli(server + "captures");
  EXPECT_NE(listed.find("d1"), std::string::npos) << listed;
  EXPECT_NE(listed.find("complete"), std::string::npos) << listed;
  // The same tables as offline.
  EXPECT_EQ(
      RunCli(server + "report d1 --report pod --report temporal --window hta"),
      RunCli("analyze --report pod --report temporal --window hta " + KinetoFixture("dlrm_8rank")));
  // The devices' limits survive the store: occupancy and SM efficiency as offline.
  const std::string gpu = RunCli(server + "report d1 --report gpu --format json");
  EXPECT_EQ(gpu, RunCli("analyze --report gpu --format json " + KinetoFixture("dlrm_8rank")));
  EXPECT_NE(gpu.find(R"("device":"Tesla V100-SXM2-32GB")"), std::string::npos)
      << gpu.substr(0, 400);
  EXPECT_EQ(gpu.find(R"("median_achieved_occupancy":null)"), std::string::npos)
      << gpu.substr(0, 400);
  EXPECT_EQ(RunCli(server + "report d1 --report stragglers --format json"),
            RunCli("analyze --report stragglers --format json " + KinetoFixture("dlrm_8rank")));
}

// `podscope import` sends files two at a time; files whose traces name no rank still get their
// place in the list as their rank, and files added to the capture later come after them. The
// REST API takes that place as `index` and refuses a bad one.
TEST_F(CoordinatorTest, ImportedFilesWithoutRanksGetTheirPlaceAsRankWhateverTheirOrder) {
  StartDaemon();
  const std::string server = CliServerFlags(port_) + " ";
  std::string all;
  for (int i = 0; i < 6; ++i) {
    const std::string file = dir_.File("norank-" + std::to_string(i) + ".json");
    std::ofstream(file) << R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k)" << i
                        << R"(","ts":1,"dur":2,"pid":0,"tid":7,"args":{"device":0,"stream":7}}]})";
    if (i < 4) all += " " + file;
  }
  ASSERT_NE(RunCli(server + "import" + all + " --capture nr").find("imported 4 files"),
            std::string::npos);
  ASSERT_NE(RunCli(server + "import " + dir_.File("norank-4.json") + " --capture nr")
                .find("imported 1 file ("),
            std::string::npos);
  ASSERT_NE(RunCli(server + "import " + dir_.File("norank-5.json") + " --capture nr")
                .find("imported 1 file ("),
            std::string::npos);
  const HttpResult record = HttpCall(port_, "GET", "/v1/captures/nr");
  ASSERT_EQ(record.status, 200);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(record.body).get(doc), simdjson::SUCCESS);
  size_t workers = 0;
  for (simdjson::dom::element w : doc["workers"].get_array()) {
    const std::string source(w["source"].get_string().value());
    EXPECT_EQ(source, "norank-" + std::to_string(w["rank"].get_int64().value()) + ".json");
    ++workers;
  }
  EXPECT_EQ(workers, 6u);
  const HttpResult indexed =
      HttpCall(port_, "POST", "/v1/captures:import?capture=nr2&name=a.json&index=7",
               FileBytes(dir_.File("norank-0.json")), "application/json");
  ASSERT_EQ(indexed.status, 201) << indexed.body;
  EXPECT_NE(indexed.body.find(R"("rank":7)"), std::string::npos) << indexed.body;
  EXPECT_EQ(HttpCall(port_, "POST", "/v1/captures:import?capture=nr2&index=-1",
                     FileBytes(dir_.File("norank-0.json")), "application/json")
                .status,
            400);
}

// Runs the CLI with stdout and stderr apart, and its exit code.
struct CliRun {
  int exit_code = -1;
  std::string out, err;
};
CliRun RunSplit(const std::string& binary, const std::string& args, const ScratchDir& dir) {
  const std::string err_file = dir.File("run.err");
  FILE* pipe = popen((binary + " " + args + " 2>" + err_file).c_str(), "r");
  CliRun run;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) run.out.append(buf.data(), n);
  run.exit_code = WEXITSTATUS(pclose(pipe));
  run.err = FileBytes(err_file);
  return run;
}
CliRun RunCliSplit(const std::string& args, const ScratchDir& dir) {
  return RunSplit(CliBinary(), args, dir);
}

// Show, trace, delete and cancel from the CLI; --server anywhere on the line or from
// PODSCOPE_SERVER; several JSON reports as one document; errors on stderr with exit code 1.
TEST_F(CoordinatorTest, TheOnlineCliShowsTracesDeletesAndCancels) {
  StartDaemon();
  // The CLI finds the CA and the token in PODSCOPE_CA_CERT and PODSCOPE_TOKEN (set by StartDaemon).
  const std::string url = "https://127.0.0.1:" + std::to_string(port_);
  ASSERT_NE(RunCli("--server " + url + " import " + KinetoFixture("dlrm_8rank") +
                   " --job dlrm --capture d1")
                .find("imported 8 files"),
            std::string::npos);
  const CliRun shown = RunCliSplit("show d1 --server " + url, dir_);
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("capture d1  job dlrm  state complete"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("none: imported, its clocks taken as they are"), std::string::npos)
      << shown.out;

  const CliRun no_server = RunCliSplit("trace d1 -o " + dir_.File("d1.json.gz"), dir_);
  EXPECT_EQ(no_server.exit_code, 1);
  EXPECT_NE(no_server.err.find("needs --server URL or PODSCOPE_SERVER"), std::string::npos)
      << no_server.err;
  setenv("PODSCOPE_SERVER", url.c_str(), 1);
  const CliRun trace = RunCliSplit("trace d1 -o " + dir_.File("d1.json.gz"), dir_);
  unsetenv("PODSCOPE_SERVER");
  EXPECT_EQ(trace.exit_code, 0) << trace.err;
  const std::string gz = FileBytes(dir_.File("d1.json.gz"));
  ASSERT_GT(gz.size(), 1000u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzip, as the name asked

  const CliRun json = RunCliSplit(
      "--server " + url + " report d1 --report pod --report stragglers --format json", dir_);
  EXPECT_EQ(json.exit_code, 0) << json.err;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json.out).get(doc), simdjson::SUCCESS) << "not one JSON document";
  EXPECT_TRUE(doc["pod"].is_object());
  EXPECT_TRUE(doc["stragglers"].is_object());

  const CliRun filtered =
      RunCliSplit("report d1 --report steps --ranks 3-4 --top 1 --server " + url, dir_);
  EXPECT_EQ(filtered.exit_code, 0) << filtered.err;
  EXPECT_NE(filtered.out.find("... 1 more workers"), std::string::npos) << filtered.out;
  EXPECT_EQ(filtered.out.find("\n    0 "), std::string::npos) << filtered.out;

  const HttpResult one = HttpCall(port_, "GET", "/v1/captures/d1/trace?gzip=1");
  EXPECT_EQ(one.status, 200);
  ASSERT_FALSE(one.body.empty());
  EXPECT_EQ(static_cast<unsigned char>(one.body[0]), 0x1f);  // gzip=1 is gzip=true
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/d1/trace?gzip=yes").status, 400);

  const CliRun cancel = RunCliSplit("--server " + url + " cancel d1", dir_);
  EXPECT_EQ(cancel.exit_code, 1);
  EXPECT_TRUE(cancel.out.empty()) << cancel.out;
  EXPECT_FALSE(cancel.err.empty());
  const CliRun removed = RunCliSplit("--server " + url + " delete d1", dir_);
  EXPECT_EQ(removed.exit_code, 0) << removed.err;
  const CliRun gone = RunCliSplit("--server " + url + " show d1", dir_);
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("d1"), std::string::npos) << gone.err;
}

// Usage errors exit 2 (CLI11's own 105-109 included) and say what is wrong on stderr.
TEST_F(CoordinatorTest, UsageErrorsExitTwo) {
  for (const char* args :
       {"analyze", "report", "capture --job x --duration 2", "capture --job x --trace t.json",
        "analyze --report nosuch x", "--no-such-flag"}) {
    const CliRun run = RunCliSplit(std::string("--server http://127.0.0.1:1 ") + args, dir_);
    EXPECT_EQ(run.exit_code, 2) << args << ": " << run.err;
    EXPECT_FALSE(run.err.empty()) << args;
  }
  const CliRun unit = RunCliSplit("--server http://127.0.0.1:1 capture --job x --duration 2", dir_);
  EXPECT_NE(unit.err.find("\"2\" is not a duration with a unit"), std::string::npos) << unit.err;
  const CliRun trace =
      RunCliSplit("--server http://127.0.0.1:1 capture --job x --trace t.json", dir_);
  EXPECT_NE(trace.err.find("--trace needs --wait"), std::string::npos) << trace.err;
}

// Daemons that say what is wrong: a second coordinator on a data directory in use
// says so in words, on stderr, and exits 1; bad flags exit 2; an agent pointed at a dead port
// says so at once (gRPC alone is silent for 25 s).
TEST_F(CoordinatorTest, DaemonsSayWhatIsWrong) {
  StartDaemon();
  const CliRun second = RunSplit(
      CoordinatorBinary(),
      "--http 127.0.0.1:0 --grpc 127.0.0.1:0 --insecure --data-dir " + dir_.File("store"), dir_);
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_TRUE(second.out.empty()) << second.out;
  EXPECT_NE(second.err.find("is in use (another podscope-coordinator running on it?)"),
            std::string::npos)
      << second.err;
  EXPECT_EQ(RunSplit(CoordinatorBinary(), "--no-such-flag", dir_).exit_code, 2);
  EXPECT_EQ(RunSplit(AgentBinary(), "--no-such-flag", dir_).exit_code, 2);

  // A loopback socket on a port of the kernel's choosing, and that port as HOST:PORT.
  auto bound_loopback = [](int* fd) {
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(bind(*fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    getsockname(*fd, reinterpret_cast<sockaddr*>(&address), &length);
    return "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  };

  // A port another process listens on, for either listener: said in words, once.
  int holder = -1;
  const std::string taken = bound_loopback(&holder);
  ASSERT_EQ(listen(holder, 1), 0);
  for (const auto& [flag, other] : {std::pair{"--grpc", "--http"}, std::pair{"--http", "--grpc"}}) {
    const CliRun busy =
        RunSplit(CoordinatorBinary(),
                 std::string(flag) + " " + taken + " " + other + " 127.0.0.1:0 --insecure " +
                     "--data-dir " + dir_.File(std::string("busy") + flag),
                 dir_);
    EXPECT_EQ(busy.exit_code, 1) << flag;
    EXPECT_NE(busy.err.find(taken + ": another process listens on that port"), std::string::npos)
        << flag << ": " << busy.err;
    EXPECT_EQ(busy.err.find("in use?"), std::string::npos) << busy.err;
  }
  close(holder);

  // A port nobody listens on: bound, then closed.
  int probe = -1;
  const std::string dead = bound_loopback(&probe);
  close(probe);
  Daemon agent(
      AgentBinary(),
      Concat({"--coordinator", dead, "--agent-id", "lost", "--simulate", "ranks=0,world=1,job=x"},
             TestSecurity::Get().AgentFlags("lost")),
      dir_.File("agent.log"));
  EXPECT_NE(agent.WaitForLog("agent lost: cannot reach the coordinator at " + dead +
                                 ": Connection refused; retrying",
                             10'000),
            "")
      << agent.Log();
}

// Through the REST API: a capture that is not one job is refused by the cross-rank
// reports (409 naming why) unless allow_mixed=true, and the reports take ranks and steps.
TEST_F(CoordinatorTest, TheApiRefusesMixedCapturesAndFilters) {
  RunCli("simulate --ranks 8 --steps 2 --forward-kernels 4 --backward-kernels 8 --buckets 2 -o " +
         dir_.File("eight"));
  RunCli("simulate --ranks 2 --steps 2 --forward-kernels 4 --backward-kernels 8 --buckets 2 -o " +
         dir_.File("two"));
  StartDaemon();
  for (const std::string& file :
       {dir_.File("eight/rank-3.json.gz"), dir_.File("two/rank-1.json.gz")}) {
    ASSERT_EQ(HttpCall(port_, "POST", "/v1/captures:import?capture=m&job=m", FileBytes(file),
                       "application/gzip")
                  .status,
              201);
  }
  const HttpResult refused = HttpCall(port_, "GET", "/v1/captures/m/pod");
  EXPECT_EQ(refused.status, 409);
  EXPECT_NE(refused.body.find("capture m is not one job: the ranks disagree on the world size (2: "
                              "ranks 1; 8: ranks 3)"),
            std::string::npos)
      << refused.body;
  const HttpResult insisted = HttpCall(port_, "GET", "/v1/captures/m/pod?allow_mixed=true");
  EXPECT_EQ(insisted.status, 200) << insisted.body;
  EXPECT_NE(insisted.body.find(R"x("warnings":["the ranks disagree on the world size)x"),
            std::string::npos);
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/m/pod").status, 409)
      << "a cached answer must not skip the check";

  for (const std::string& file :
       {dir_.File("eight/rank-0.json.gz"), dir_.File("eight/rank-1.json.gz")}) {
    ASSERT_EQ(HttpCall(port_, "POST", "/v1/captures:import?capture=e&job=e", FileBytes(file),
                       "application/gzip")
                  .status,
              201);
  }
  const HttpResult one =
      HttpCall(port_, "GET", "/v1/captures/e/steps?format=table&ranks=1&steps=1");
  EXPECT_EQ(one.status, 200) << one.body;
  EXPECT_NE(one.body.find("\n    1       1 "), std::string::npos) << one.body;
  EXPECT_EQ(one.body.find("\n    0 "), std::string::npos) << one.body;
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/e/steps?ranks=x").status, 400);

  // The trace takes export's filters.
  const HttpResult rank_one = HttpCall(port_, "GET", "/v1/captures/e/trace?ranks=1&steps=1");
  EXPECT_EQ(rank_one.status, 200);
  EXPECT_NE(rank_one.body.find(R"("workers":[{"pid":1,"rank":1,)"), std::string::npos)
      << rank_one.body.substr(0, 300);
  EXPECT_EQ(rank_one.body.find(R"("rank":0)"), std::string::npos);
  EXPECT_LT(rank_one.body.size(), HttpCall(port_, "GET", "/v1/captures/e/trace").body.size() / 3);
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/e/trace?ranks=5").status, 404);
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/e/trace?steps=x").status, 400);
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/e/trace?window=5-1s").status, 400);
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/e/trace?colour=1").status, 400);
}

TEST_F(CoordinatorTest, KilledDuringImportRestartsWithTheImportMarkedFailed) {
  StartDaemon();
  ASSERT_EQ(Import("done", 0).status, 201);
  daemon_->Kill();
  // Simulate a crash mid-import: a record left in "importing" with some of its events.
  {
    auto store = storage::RocksDbTraceStore::Open({.path = dir_.File("store")});
    ASSERT_TRUE(store.ok()) << store.status();
    storage::CaptureRecord r;
    r.id = "interrupted";
    r.job = "tf";
    r.state = storage::CaptureState::kImporting;
    ASSERT_TRUE((*store)->PutCapture(r).ok());
  }
  StartDaemon();
  const HttpResult interrupted = HttpCall(port_, "GET", "/v1/captures/interrupted");
  EXPECT_NE(interrupted.body.find("\"state\":\"failed\""), std::string::npos) << interrupted.body;
  EXPECT_NE(interrupted.body.find("import interrupted"), std::string::npos);
  const HttpResult done = HttpCall(port_, "GET", "/v1/captures/done/temporal?window=hta");
  EXPECT_EQ(done.status, 200);
  EXPECT_NE(done.body.find("\"idle_ns\":321378000"), std::string::npos);
}

// A real crash: SIGKILL while a large import is in flight. Whatever the timing, the store
// opens, the completed capture is intact, and the interrupted one is absent, marked failed,
// or (if it beat the kill) complete and analysable.
TEST_F(CoordinatorTest, Kill9DuringImportLeavesNoHalfWrittenCapture) {
  RunCli("simulate --ranks 1 --steps 400 --plain-json -o " + dir_.File("big"));
  const std::string big = FileBytes(dir_.File("big/rank-0.json"));
  ASSERT_GT(big.size(), 50u << 20);
  StartDaemon();
  ASSERT_EQ(Import("done", 0).status, 201);
  std::thread upload(
      [&] { HttpCall(port_, "POST", "/v1/captures:import?capture=big", big, "application/json"); });
  // Not a timing assertion: the kill lands somewhere in the import, and every outcome is checked.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // not a timing assertion
  daemon_->Kill();
  upload.join();
  StartDaemon();
  EXPECT_NE(HttpCall(port_, "GET", "/v1/captures/done/temporal?window=hta")
                .body.find("\"idle_ns\":321378000"),
            std::string::npos);
  const HttpResult interrupted = HttpCall(port_, "GET", "/v1/captures/big");
  if (interrupted.status == 200 &&
      interrupted.body.find("\"state\":\"complete\"") != std::string::npos) {
    EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/big/steps").status, 200);
  } else if (interrupted.status == 200) {
    EXPECT_NE(interrupted.body.find("\"state\":\"failed\""), std::string::npos) << interrupted.body;
  } else {
    EXPECT_EQ(interrupted.status, 404) << interrupted.body;
  }
}

// SIGKILL while retention deletes captures: each capture is either whole or entirely gone.
TEST_F(CoordinatorTest, Kill9DuringRetentionLeavesWholeCapturesOnly) {
  StartDaemon();
  for (int i = 0; i < 12; ++i) ASSERT_EQ(Import("c" + std::to_string(i), i % 2).status, 201);
  daemon_->Terminate();
  std::ofstream(dir_.File("retention.json"))
      << R"({"retention": {"max_total_bytes": 400000, "interval_seconds": 1}})";
  StartDaemon({"--config", dir_.File("retention.json")});
  // Not a timing assertion: the kill lands during (or around) the first retention pass, and
  // every outcome is checked.
  std::this_thread::sleep_for(std::chrono::milliseconds(1010));  // not a timing assertion
  daemon_->Kill();
  StartDaemon();  // no retention configured now
  // How many survive depends on when the kill landed; each one answers whole or not at all.
  for (int i = 0; i < 12; ++i) {
    const std::string id = "c" + std::to_string(i);
    const HttpResult r = HttpCall(port_, "GET", "/v1/captures/" + id + "/kernels");
    EXPECT_TRUE(r.status == 200 || r.status == 404) << id << ": " << r.status << " " << r.body;
  }
  EXPECT_EQ(daemon_->Terminate(), 0);
  auto store = storage::RocksDbTraceStore::Open({.path = dir_.File("store")});
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 0; i < 12; ++i) {
    const std::string id = "c" + std::to_string(i);
    const bool has_record = (*store)->GetCapture(id).ok();
    const size_t keys = (*store)->CountCaptureKeysForTesting(id);
    EXPECT_EQ(has_record, keys > 0) << id << ": record and events must go together";
  }
}

}  // namespace
}  // namespace podscope::testing

namespace podscope::testing {
namespace {

// SIGTERM while reports are being computed and more wait for the heavy threads: the reports end
// at their next worker with a 503 that says the coordinator is stopping (a report is cheaper to
// ask again than to wait for), so every client gets an answer rather than a cut connection, and
// the daemon exits cleanly within its grace. Without the cancellation the reports would run to
// their end: no 503, and whatever still queued when the grace ran out would be cut.
TEST_F(CoordinatorTest, SigtermDuringReportsEndsThemWithAnAnswer) {
  // 8 ranks of 100 dense steps, rank 3 slower: each stragglers report reads every worker up to
  // three times (about 550 k events).
  RunCli("simulate --ranks 8 --steps 100 --preset dense --straggler 3:1.2 -o " + dir_.File("job"));
  StartDaemon();
  const std::string imported =
      RunCli(CliServerFlags(port_) + " import " + dir_.File("job") + " --job j --capture c");
  ASSERT_NE(imported.find("imported 8 files"), std::string::npos) << imported;
  // Distinct requests (each its own `top`): none shares another's answer or the cache.
  constexpr int kReports = 24;
  std::vector<HttpResult> answers(kReports);
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kReports; ++i) {
    clients.emplace_back([&, i] {
      answers[i] = HttpCall(port_, "GET", "/v1/captures/c/stragglers?top=" + std::to_string(i + 1));
      ++answered;
    });
  }
  // Every client connected (each request's connection, and the one asking), and a report begun.
  const bool ready = WaitFor([&] {
    const std::string metrics = HttpCall(port_, "GET", "/metrics").body;
    const std::string gauge = "\npodscope_http_open_connections ";
    const size_t at = metrics.find(gauge);
    if (at == std::string::npos) return false;
    const size_t end = metrics.find('\n', at + gauge.size());
    const absl::StatusOr<int64_t> open = common::ParseInt(
        std::string_view(metrics).substr(at + gauge.size(), end - at - gauge.size()));
    return metrics.find("podscope_reports_computed_total 0\n") == std::string::npos && open.ok() &&
           *open >= kReports + 1 - answered.load();
  });
  const int answered_before = answered.load();
  if (ready) daemon_->Signal(SIGTERM);
  for (std::thread& t : clients) t.join();
  ASSERT_TRUE(ready) << "the reports never all started";
  ASSERT_LT(answered_before, kReports) << "every report was answered before the signal";
  EXPECT_EQ(daemon_->WaitForExit(), 0);
  int stopped = 0;
  for (const HttpResult& r : answers) {
    if (r.status == 503) {
      EXPECT_NE(r.body.find("the coordinator is stopping"), std::string::npos) << r.body;
      ++stopped;
    } else {
      EXPECT_EQ(r.status, 200) << r.body;
    }
  }
  EXPECT_GE(stopped, 1);
}

// A report whose every client has gone is stopped at its next worker, not computed to its end
// and cached for nobody: the coordinator counts it abandoned, and the next client computes it
// afresh (a miss, not a hit from the abandoned work). Like nginx, a client that has closed its
// sending side is taken to have gone.
TEST_F(CoordinatorTest, AReportEveryClientLeftStopsAtItsNextWorker) {
  RunCli("simulate --ranks 8 --steps 100 --preset dense --straggler 3:1.2 -o " + dir_.File("job"));
  StartDaemon();
  const std::string imported =
      RunCli(CliServerFlags(port_) + " import " + dir_.File("job") + " --job j --capture c");
  ASSERT_NE(imported.find("imported 8 files"), std::string::npos) << imported;
  // Asked for, then the connection closed before any answer could come.
  {
    RawHttp client = HttpConnectFrom("127.0.0.1", port_);
    ASSERT_NE(client, nullptr);
    const std::string token = GetPortSecurity(port_).token;
    ASSERT_TRUE(client->Send("GET /v1/captures/c/stragglers HTTP/1.1\r\nHost: x\r\n" +
                             (token.empty() ? "" : "Authorization: Bearer " + token + "\r\n") +
                             "\r\n"));
  }
  auto metric = [&](const std::string& line) {
    return HttpCall(port_, "GET", "/metrics").body.find("\n" + line + "\n") != std::string::npos;
  };
  EXPECT_TRUE(WaitFor([&] { return metric("podscope_reports_abandoned_total 1"); }))
      << HttpCall(port_, "GET", "/metrics").body;
  const HttpResult again = HttpCall(port_, "GET", "/v1/captures/c/stragglers");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.headers.at("x-podscope-cache"), "miss");
  EXPECT_NE(again.body.find("\"rank\":3"), std::string::npos);
  EXPECT_TRUE(metric("podscope_reports_computed_total 2"));
  EXPECT_TRUE(metric("podscope_reports_abandoned_total 1"));
}

}  // namespace
}  // namespace podscope::testing
