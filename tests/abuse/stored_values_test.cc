// Stored values against the real coordinator: what a client was told was stored reads back the
// same after a restart, and a stored record a start cannot read is set aside (kept, logged,
// counted, listed) while the coordinator starts and serves every other record.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "storage/rocksdb_trace_store.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/daemon.h"
#include "tests/integration/raw_client.h"
#include "tests/integration/test_security.h"

namespace podscope::testing {
namespace {

using Clock = std::chrono::steady_clock;

simdjson::dom::element Json(simdjson::dom::parser& parser, const std::string& body) {
  simdjson::dom::element doc;
  EXPECT_EQ(parser.parse(body).get(doc), simdjson::SUCCESS) << body;
  return doc;
}

class StoredValuesTest : public CoordinatorTest {
 protected:
  // Writes a setting into the stopped coordinator's store, as a damaged disk or another
  // version might have left it.
  void StoreSetting(const std::string& name, const std::string& value) {
    absl::StatusOr<std::unique_ptr<storage::RocksDbTraceStore>> store =
        storage::RocksDbTraceStore::Open({.path = dir_.File("store")});
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->PutSetting(name, value).ok());
  }
};

// A capture record that does not decode (a damaged disk, another version's format): the
// coordinator starts, lists and serves every other capture, says which record it skipped (log,
// /metrics, the record's own GET), and a DELETE drops it.
TEST_F(StoredValuesTest, AnUndecodableCaptureRecordIsSkippedKeptAndDeletable) {
  StartDaemon();
  ASSERT_EQ(Import("good", 0).status, 201);
  ASSERT_EQ(daemon_->Terminate(), 0);
  {
    // Straight into the captures column family, as a damaged disk would leave it.
    std::vector<std::string> families;
    ASSERT_TRUE(
        rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir_.File("store"), &families).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const std::string& f : families)
      descriptors.emplace_back(f, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(
        rocksdb::DB::Open(rocksdb::DBOptions(), dir_.File("store"), descriptors, &handles, &db)
            .ok());
    size_t captures = 0;
    while (captures < families.size() && families[captures] != "captures") ++captures;
    ASSERT_LT(captures, families.size());
    EXPECT_TRUE(db->Put(rocksdb::WriteOptions(), handles[captures], "cap-damaged",
                        std::string("\xff\xff\xff\x0f garbage", 14))
                    .ok());
    // Records that decode, but not to their key's capture: "good"'s record under another id,
    // and an empty one (a capture with no id). Listed, they would show "good" twice, or a
    // capture no call can reach.
    std::string good;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), handles[captures], "good", &good).ok());
    EXPECT_TRUE(db->Put(rocksdb::WriteOptions(), handles[captures], "cap-moved", good).ok());
    EXPECT_TRUE(db->Put(rocksdb::WriteOptions(), handles[captures], "cap-empty", "").ok());
    for (rocksdb::ColumnFamilyHandle* h : handles) db->DestroyColumnFamilyHandle(h);
    delete db;
  }

  const auto start = Clock::now();
  StartDaemon();
  ASSERT_GT(port_, 0) << daemon_->Log();
  const double start_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_NE(daemon_->WaitForLog("stored capture cap-damaged: .*skipped and kept"), "");
  EXPECT_EQ(HttpCall(port_, "GET", "/readyz").status, 200);
  const HttpResult list = HttpCall(port_, "GET", "/v1/captures");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_NE(list.body.find("\"good\""), std::string::npos) << list.body;
  EXPECT_EQ(list.body.find("\"good\""), list.body.rfind("\"good\""))
      << "listed once: " << list.body;
  for (const char* id : {"cap-damaged", "cap-moved", "cap-empty", "\"id\":\"\""})
    EXPECT_EQ(list.body.find(id), std::string::npos) << id << " in " << list.body;
  EXPECT_EQ(Metric(port_, R"(podscope_stored_records_unreadable{kind="capture"})"), "3");
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/cap-moved").status / 100, 5);
  const HttpResult damaged = HttpCall(port_, "GET", "/v1/captures/cap-damaged");
  EXPECT_EQ(damaged.status / 100, 5) << damaged.body;
  EXPECT_NE(damaged.body.find("does not parse"), std::string::npos) << damaged.body;
  EXPECT_EQ(HttpCall(port_, "DELETE", "/v1/captures/cap-damaged").status, 204);
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/cap-damaged").status, 404);
  EXPECT_EQ(HttpCall(port_, "DELETE", "/v1/captures/cap-moved").status, 204);
  EXPECT_EQ(Metric(port_, R"(podscope_stored_records_unreadable{kind="capture"})"), "1");
  EXPECT_EQ(HttpCall(port_, "GET", "/v1/captures/good").status, 200) << "the real one is untouched";
  std::printf(
      "[ abuse ] an undecodable capture record: the coordinator started in %.0f ms and "
      "served the rest; deleted through the API\n",
      start_ms);
  std::fflush(stdout);
}

// A capture token's schedule whose duration is a nanosecond under its period: the decimal
// seconds once stored for it read back truncated, a nanosecond shorter, and every start of the
// coordinator stopped on it. Now a schedule is refused, or reads back as the client was told.
TEST_F(StoredValuesTest, AScheduleAtTheEdgeOfItsBoundsSurvivesRestarts) {
  StartDaemon();
  const std::string& token = TestSecurity::Get().capture_token;
  // 512,008,022,174 ns and, to the nearest nanosecond, the same: not under it.
  const HttpResult equal =
      HttpCallWithToken(port_, token, "POST", "/v1/schedules",
                        R"({"job":"demo","every_s":512.0080221745,"duration_ms":512008.0221735})",
                        "application/json");
  EXPECT_EQ(equal.status, 400) << equal.body;
  EXPECT_NE(equal.body.find("duration_ms"), std::string::npos) << equal.body;
  // 512,008,022,174 ns and 512,008,022,173 ns: accepted, and what it was told must hold.
  const HttpResult added =
      HttpCallWithToken(port_, token, "POST", "/v1/schedules",
                        R"({"job":"demo","every_s":512.0080221745,"duration_ms":512008.0221734})",
                        "application/json");
  ASSERT_EQ(added.status, 201) << added.body;
  simdjson::dom::parser told_parser;
  simdjson::dom::element told = Json(told_parser, added.body);
  for (int start = 1; start <= 2; ++start) {
    ASSERT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    const auto begin = Clock::now();
    StartDaemon();
    ASSERT_GT(port_, 0) << daemon_->Log();
    std::printf("[ stored ] restart %d after the edge-of-bounds schedule: serving in %.2f s\n",
                start, std::chrono::duration<double>(Clock::now() - begin).count());
    const HttpResult listed = HttpCall(port_, "GET", "/v1/schedules");
    ASSERT_EQ(listed.status, 200) << listed.body;
    simdjson::dom::parser parser;
    simdjson::dom::element doc = Json(parser, listed.body);
    ASSERT_EQ(doc["schedules"].get_array().size(), 1u) << listed.body;
    simdjson::dom::element s = doc["schedules"].at(0);
    EXPECT_EQ(s["every_s"].get_double().value(), told["every_s"].get_double().value());
    EXPECT_EQ(s["duration_ms"].get_double().value(), told["duration_ms"].get_double().value());
    EXPECT_EQ(doc["set_aside"].get_array().size(), 0u) << listed.body;
  }
}

// A stored schedule that breaks a bound, another that is not a schedule, and a stored alert rule
// that no longer parses: the coordinator starts, runs the good ones, and names the others on
// /v1/schedules, /v1/alerts/rules, /metrics and its log; they are kept, not dropped.
TEST_F(StoredValuesTest, ADamagedStoredRecordIsSetAsideAndTheCoordinatorStarts) {
  StartDaemon();
  ASSERT_EQ(HttpCall(port_, "POST", "/v1/schedules",
                     R"({"job":"good","every_s":60,"duration_ms":1000})", "application/json")
                .status,
            201);
  const HttpResult rules = HttpCall(port_, "GET", "/v1/alerts/rules");
  ASSERT_EQ(rules.status, 200);
  const HttpResult book = HttpCall(port_, "GET", "/v1/schedules");
  ASSERT_EQ(daemon_->Terminate(), 0);

  // The stored book as the coordinator wrote it, plus two damaged schedules.
  simdjson::dom::parser parser;
  const std::string good = simdjson::to_string(Json(parser, book.body)["schedules"].at(0));
  const std::string too_long =
      R"({"id":"sch-000090","job":"bad","every_s":60,"duration_ms":60000,"ranks":[],)"
      R"("created_ns":1,"next_ns":2,"last_run_ns":0,"last_capture_id":null,"last_error":"",)"
      R"("runs":0,"deferred":0,"failed":0})";
  StoreSetting("capture_schedules", R"({"next_id":91,"schedules":[)" + good + "," + too_long +
                                        R"(,{"id":"sch-000091","job":7}]})");
  // The rule set with one rule whose threshold is out of its range.
  std::string stored_rules = rules.body;
  const std::string rules_key = "\"rules\":[";
  const size_t at = stored_rules.find(rules_key);
  ASSERT_NE(at, std::string::npos) << stored_rules;
  stored_rules.insert(at + rules_key.size(),
                      R"({"name":"broken","kind":"straggler","min_share_of_step_time":7},)");
  StoreSetting("alert_rules", stored_rules);

  StartDaemon();
  ASSERT_GT(port_, 0) << daemon_->Log();
  const HttpResult listed = HttpCall(port_, "GET", "/v1/schedules");
  ASSERT_EQ(listed.status, 200) << listed.body;
  simdjson::dom::element doc = Json(parser, listed.body);
  ASSERT_EQ(doc["schedules"].get_array().size(), 1u) << listed.body;
  EXPECT_EQ(doc["schedules"].at(0)["job"].get_string().value(), "good");
  ASSERT_EQ(doc["set_aside"].get_array().size(), 2u) << listed.body;
  EXPECT_EQ(doc["set_aside"].at(0)["id"].get_string().value(), "sch-000090");
  EXPECT_NE(std::string(doc["set_aside"].at(0)["error"].get_string().value()).find("duration_ms"),
            std::string::npos)
      << listed.body;
  EXPECT_NE(std::string(doc["set_aside"].at(0)["record"].get_string().value()).find("\"bad\""),
            std::string::npos)
      << "kept as it was stored: " << listed.body;
  EXPECT_EQ(doc["set_aside"].at(1)["id"].get_string().value(), "sch-000091");

  const HttpResult rules_now = HttpCall(port_, "GET", "/v1/alerts/rules");
  simdjson::dom::element r = Json(parser, rules_now.body);
  EXPECT_EQ(r["rules"].get_array().size(), 6u) << rules_now.body;
  ASSERT_EQ(r["set_aside"].get_array().size(), 1u) << rules_now.body;
  EXPECT_EQ(r["set_aside"].at(0)["id"].get_string().value(), "broken");
  EXPECT_NE(std::string(r["set_aside"].at(0)["error"].get_string().value())
                .find("min_share_of_step_time"),
            std::string::npos)
      << rules_now.body;
  // GET's answer, set_aside and all, is a rule set PUT takes.
  EXPECT_EQ(HttpCall(port_, "PUT", "/v1/alerts/rules", rules_now.body, "application/json").status,
            200);

  EXPECT_EQ(Metric(port_, R"(podscope_stored_records_set_aside{setting="capture_schedules"})"),
            "2");
  EXPECT_EQ(Metric(port_, R"(podscope_stored_records_set_aside{setting="alert_rules"})"), "1");
  EXPECT_NE(daemon_->Log().find("stored schedule sch-000090: duration_ms"), std::string::npos)
      << daemon_->Log();

  // Set aside once: the next start finds a clean book and still lists what was set aside.
  ASSERT_EQ(daemon_->Terminate(), 0);
  StartDaemon();
  ASSERT_GT(port_, 0) << daemon_->Log();
  doc = Json(parser, HttpCall(port_, "GET", "/v1/schedules").body);
  EXPECT_EQ(doc["schedules"].get_array().size(), 1u);
  EXPECT_EQ(doc["set_aside"].get_array().size(), 2u);
  EXPECT_EQ(daemon_->Log().find("set aside"), std::string::npos) << daemon_->Log();
  // New schedules take ids of their own, past the set-aside ones.
  const HttpResult next =
      HttpCall(port_, "POST", "/v1/schedules", R"({"job":"next","every_s":60,"duration_ms":1000})",
               "application/json");
  ASSERT_EQ(next.status, 201) << next.body;
  EXPECT_NE(next.body.find("\"id\":\"sch-000092\""), std::string::npos)
      << "past every stored id, set aside or not: " << next.body;
}

// Two schedules naming 65,536 ranks each (448 KB bodies) once filled the 1 MiB stored setting,
// and every later schedule from anyone was refused. Ranks are stored as ranges now, and each
// schedule's stored form has a bound of its own: the next 254 schedules still fit.
TEST_F(StoredValuesTest, LargeSchedulesLeaveRoomForEveryoneElse) {
  StartDaemon();
  const std::string& token = TestSecurity::Get().capture_token;
  std::string consecutive = R"({"job":"wide","every_s":600,"duration_ms":1000,"ranks":[)";
  std::string scattered = R"({"job":"wide","every_s":600,"duration_ms":1000,"ranks":[)";
  for (int r = 0; r < 65'536; ++r) {
    consecutive += (r ? "," : "") + std::to_string(r);
    scattered += (r ? "," : "") + std::to_string(2 * r);
  }
  consecutive += "]}";
  scattered += "]}";
  std::printf("[ stored ] schedule bodies: %zu and %zu bytes\n", consecutive.size(),
              scattered.size());
  for (int i = 0; i < 2; ++i) {
    const HttpResult r =
        HttpCallWithToken(port_, token, "POST", "/v1/schedules", consecutive, "application/json");
    ASSERT_EQ(r.status, 201) << r.body.substr(0, 300);
    EXPECT_NE(r.body.find(R"("ranks":"0-65535")"), std::string::npos) << r.body.substr(0, 300);
  }
  // Every other rank cannot be written shorter: refused, naming why, storing nothing.
  const HttpResult refused =
      HttpCallWithToken(port_, token, "POST", "/v1/schedules", scattered, "application/json");
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("write ranks as ranges"), std::string::npos) << refused.body;
  // The rest of the book's 256 schedules, each as wide as a rank range can say.
  int created = 2;
  for (int i = 0; i < 254; ++i) {
    const HttpResult r = HttpCallWithToken(
        port_, token, "POST", "/v1/schedules",
        R"({"job":"j)" + std::to_string(i) +
            R"(","every_s":600,"duration_ms":1000,)"
            R"("ranks":"0-1,3-4,6-7,9-10,12-13,15-16,18-19,21-22,24-25,27-28,30-31"})",
        "application/json");
    if (r.status == 201) ++created;
    EXPECT_EQ(r.status, 201) << i << ": " << r.body;
  }
  EXPECT_EQ(created, 256);
  const HttpResult full =
      HttpCall(port_, "POST", "/v1/schedules", R"({"job":"late","every_s":600,"duration_ms":1000})",
               "application/json");
  EXPECT_EQ(full.status, 409) << "the count bound, not the bytes, is what refuses: " << full.body;
  const size_t listed = HttpCall(port_, "GET", "/v1/schedules").body.size();
  std::printf("[ stored ] 256 schedules after two of 65,536 ranks: GET /v1/schedules %zu bytes\n",
              listed);
  // And they all read back after a restart.
  ASSERT_EQ(daemon_->Terminate(), 0);
  StartDaemon();
  ASSERT_GT(port_, 0) << daemon_->Log();
  simdjson::dom::parser parser;
  EXPECT_EQ(
      Json(parser, HttpCall(port_, "GET", "/v1/schedules").body)["schedules"].get_array().size(),
      256u);
}

}  // namespace
}  // namespace podscope::testing
