// The coordinator as one object, in this process: built, started on ports of the kernel's
// choosing, serving, and stopped by its destructor; a start that fails half-way leaves nothing
// running and the store free for the next.
#include "coordinator/coordinator.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "http/http_client.h"
#include "tests/test_paths.h"

namespace podscope::coordinator {
namespace {

CoordinatorSettings Plain(const std::string& data_dir) {
  CoordinatorSettings s;
  s.http = "127.0.0.1:0";
  s.grpc = "127.0.0.1:0";
  s.data_dir = data_dir;
  s.insecure = true;
  DeriveCoordinatorSettings(&s);
  return s;
}

int Get(uint16_t port, const std::string& target) {
  http::ServerAddress server{.host = "127.0.0.1", .port = port, .timeout_seconds = 10};
  absl::StatusOr<http::HttpClientResponse> r = http::HttpRequestTo(server, "GET", target);
  return r.ok() ? r->status : 0;
}

// A loopback port that another socket listens on, until `*fd` is closed.
std::string TakenPort(int* fd) {
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  EXPECT_EQ(bind(*fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(listen(*fd, 1), 0);
  getsockname(*fd, reinterpret_cast<sockaddr*>(&address), &length);
  return "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
}

TEST(CoordinatorTest, StartsServesAndStopsAllItStarted) {
  testing::ScratchDir dir;
  for (int run = 0; run < 2; ++run) {  // the second finds the store free again
    absl::StatusOr<std::unique_ptr<Coordinator>> c =
        Coordinator::Create(Plain(dir.File("store")), common::RealTime());
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->Start().ok());
    ASSERT_NE((*c)->http_port(), 0);
    EXPECT_NE((*c)->grpc_port(), 0);
    EXPECT_EQ(Get((*c)->http_port(), "/healthz"), 200) << run;
    EXPECT_EQ(Get((*c)->http_port(), "/v1/captures"), 200) << run;
    const uint16_t port = (*c)->http_port();
    c->reset();
    EXPECT_EQ(Get(port, "/healthz"), 0) << "still answering after the destructor";
  }
}

TEST(CoordinatorTest, AStartThatFailsHalfWayStopsWhatItStarted) {
  testing::ScratchDir dir;
  int holder = -1;
  CoordinatorSettings settings = Plain(dir.File("store"));
  settings.grpc = TakenPort(&holder);
  absl::StatusOr<std::unique_ptr<Coordinator>> c =
      Coordinator::Create(settings, common::RealTime());
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Status started = (*c)->Start();
  EXPECT_FALSE(started.ok());
  EXPECT_NE(started.message().find(settings.grpc), std::string_view::npos) << started;
  EXPECT_EQ((*c)->http_port(), 0);  // never reached
  c->reset();  // stops the scheduler, clock keeper, notifier and watch it had started
  close(holder);
  // The store was closed with it: the next coordinator opens it.
  absl::StatusOr<std::unique_ptr<Coordinator>> next =
      Coordinator::Create(Plain(dir.File("store")), common::RealTime());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE((*next)->Start().ok());
}

// An upload folder it cannot use would fail every import: the start fails instead, naming it.
TEST(CoordinatorTest, AnUploadFolderItCannotUseFailsTheStart) {
  testing::ScratchDir dir;
  CoordinatorSettings settings = Plain(dir.File("store"));
  settings.http_limits.upload_dir = dir.Write("uploads-is-a-file", "");
  absl::StatusOr<std::unique_ptr<Coordinator>> c =
      Coordinator::Create(settings, common::RealTime());
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Status started = (*c)->Start();
  EXPECT_NE(started.message().find("cannot use the upload folder"), std::string_view::npos)
      << started;
}

TEST(CoordinatorTest, CreateRefusesWhatTheConfigGetsWrong) {
  testing::ScratchDir dir;
  CoordinatorSettings no_tokens = Plain(dir.File("store"));
  no_tokens.insecure = false;
  const absl::Status tokens = Coordinator::Create(no_tokens, common::RealTime()).status();
  EXPECT_EQ(tokens.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tokens.message().find("--auth-tokens"), std::string_view::npos) << tokens;

  CoordinatorSettings bad_address = Plain(dir.File("store"));
  bad_address.http = "127.0.0.1:99999";
  const absl::Status address = Coordinator::Create(bad_address, common::RealTime()).status();
  EXPECT_EQ(address.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(address.message().find("--http"), std::string_view::npos) << address;

  CoordinatorSettings named = Plain(dir.File("store"));
  named.http = "localhost:0";  // the REST server binds an address, not a name
  const absl::Status name = Coordinator::Create(named, common::RealTime()).status();
  EXPECT_EQ(name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(name.message().find("not an IP address"), std::string_view::npos) << name;

  CoordinatorSettings missing_file = Plain(dir.File("store"));
  missing_file.auth_tokens = dir.File("no-such-tokens");
  EXPECT_FALSE(Coordinator::Create(missing_file, common::RealTime()).ok());
}

}  // namespace
}  // namespace podscope::coordinator
