// The connection admission keys of the coordinator's config file (connection_limits.h), on the
// REST port (`limits`) and the agents' port (`agents`): read, and refused out of range.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>

#include "coordinator/coordinator_config.h"

namespace podscope {
namespace {

absl::Status Apply(std::string_view json, coordinator::CoordinatorSettings* s) {
  return coordinator::ApplyCoordinatorConfig(boost::json::parse(json).as_object(), s);
}

TEST(ConnectionConfigTest, AdmissionKeysAreReadAndChecked) {
  coordinator::CoordinatorSettings s;
  EXPECT_EQ(s.http_limits.min_eviction_age_ms, 1000u);
  EXPECT_EQ(s.grpc_gate.min_eviction_age_ms, 100u);
  EXPECT_EQ(s.http_limits.max_connections_per_token, 128u);
  ASSERT_TRUE(Apply(R"({"limits": {"min_eviction_age_ms": 250, "proven_client_seconds": 0,
                                   "max_connections_per_token": 16},
                        "agents": {"min_eviction_age_ms": 0, "proven_client_seconds": 3600}})",
                    &s)
                  .ok());
  EXPECT_EQ(s.http_limits.min_eviction_age_ms, 250u);
  EXPECT_EQ(s.http_limits.proven_client_seconds, 0u);
  EXPECT_EQ(s.http_limits.max_connections_per_token, 16u);
  EXPECT_EQ(s.grpc_gate.min_eviction_age_ms, 0u);
  EXPECT_EQ(s.grpc_gate.proven_client_seconds, 3600u);
  for (const char* bad : {R"({"limits": {"min_eviction_age_ms": -1}})",
                          R"({"limits": {"min_eviction_age_ms": 600001}})",
                          R"({"limits": {"proven_client_seconds": 604801}})",
                          R"({"limits": {"max_connections_per_token": 0}})",
                          R"({"agents": {"proven_client_seconds": "long"}})"}) {
    coordinator::CoordinatorSettings fresh;
    const absl::Status status = Apply(bad, &fresh);
    EXPECT_FALSE(status.ok()) << bad;
    EXPECT_TRUE(status.message().find("min_eviction_age_ms") != std::string_view::npos ||
                status.message().find("proven_client_seconds") != std::string_view::npos ||
                status.message().find("max_connections_per_token") != std::string_view::npos)
        << status;
  }
}

TEST(ConnectionConfigTest, TheAnalysisMemoryBudgetIsReadAndChecked) {
  coordinator::CoordinatorSettings s;
  EXPECT_EQ(s.api_limits.analysis_memory_budget_bytes, 2ull << 30);
  EXPECT_EQ(s.api_limits.max_queued_analyses, 16u);
  EXPECT_EQ(s.api_limits.max_export_bytes, 0u);  // exports stream: no cap unless asked
  ASSERT_TRUE(Apply(R"({"analysis": {"memory_budget_mb": 512, "max_queued": 0},
                        "limits": {"max_export_bytes": 1048576}})",
                    &s)
                  .ok());
  EXPECT_EQ(s.api_limits.max_export_bytes, 1u << 20);
  EXPECT_EQ(s.api_limits.analysis_memory_budget_bytes, 512ull << 20);
  EXPECT_EQ(s.api_limits.max_queued_analyses, 0u);
  for (const char* bad :
       {R"({"analysis": {"memory_budget_mb": 63}})", R"({"analysis": {"max_queued": 10001}})",
        R"({"analysis": {"memory_budget": 512}})"}) {
    coordinator::CoordinatorSettings fresh;
    const absl::Status status = Apply(bad, &fresh);
    EXPECT_FALSE(status.ok()) << bad;
    EXPECT_NE(status.message().find("analysis"), std::string_view::npos) << status;
  }
}

}  // namespace
}  // namespace podscope
