#include "common/unix_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "tests/test_paths.h"

namespace podscope::common {
namespace {

TEST(UnixSocketTest, ListensAcceptsAndTellsWhoIsOnTheOtherEnd) {
  testing::ScratchDir dir;
  const std::string path = dir.File("run/podscope/agent.sock");  // the directory is created
  absl::StatusOr<UniqueFd> listener = ListenUnix(path, 0666);
  ASSERT_TRUE(listener.ok()) << listener.status();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);  // asked for 0666: never world-writable

  absl::StatusOr<UniqueFd> client = ConnectUnix(path);
  ASSERT_TRUE(client.ok()) << client.status();
  UniqueFd accepted(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted.valid());
  absl::StatusOr<PeerCredentials> peer = PeerCredentialsOf(accepted.get());
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->pid, ::getpid());
  EXPECT_EQ(peer->uid, ::getuid());
  EXPECT_EQ(peer->gid, ::getgid());
}

TEST(UnixSocketTest, AStaleSocketIsReplacedALiveOneAndOtherFilesAreNot) {
  testing::ScratchDir dir;
  const std::string path = dir.File("agent.sock");
  {
    absl::StatusOr<UniqueFd> first = ListenUnix(path);
    ASSERT_TRUE(first.ok());
    // Still listening: a second agent must not steal the path.
    EXPECT_EQ(ListenUnix(path).status().code(), absl::StatusCode::kAlreadyExists);
  }
  // The first is gone (its file is left): the path is reused.
  EXPECT_TRUE(ListenUnix(path).ok());

  const std::string file = dir.File("not-a-socket");
  std::ofstream(file) << "data";
  EXPECT_EQ(ListenUnix(file).status().code(), absl::StatusCode::kAlreadyExists);
  std::ifstream in(file);
  std::string kept;
  in >> kept;
  EXPECT_EQ(kept, "data");
}

TEST(UnixSocketTest, BadPathsAndAbsentListenersAreClearErrors) {
  EXPECT_EQ(ListenUnix("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ListenUnix("/tmp/" + std::string(200, 'x')).status().code(),
            absl::StatusCode::kInvalidArgument);
  testing::ScratchDir dir;
  absl::StatusOr<UniqueFd> nobody = ConnectUnix(dir.File("nobody.sock"));
  EXPECT_EQ(nobody.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(nobody.status().message()).find("nobody.sock"), std::string::npos);
}

}  // namespace
}  // namespace podscope::common
