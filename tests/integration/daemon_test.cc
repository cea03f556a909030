#include "tests/integration/daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "gtest/gtest.h"

namespace podscope::testing {
namespace {

// Read here on its own, not through the helper under test.
std::pair<int, int> KernelEphemeralRange() {
  std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  file >> low >> high;
  return {low, high};
}

// Ports a test hands to a daemon must not be ones the kernel gives outgoing connections: in the
// window between the pick and the daemon's listen, a peer's connection could take it (ShardTest
// failed with "Address already in use" so). Without the fix, FreePort returned bind(0)'s port,
// which is always inside that range.
TEST(FreePortTest, IsOutsideTheEphemeralRangeFreeAndNeverTheSameTwice) {
  const auto [low, high] = KernelEphemeralRange();
  ASSERT_GT(high, 0) << "cannot read /proc/sys/net/ipv4/ip_local_port_range";
  std::set<int> seen;
  for (int i = 0; i < 200; ++i) {
    const int port = FreePort();
    EXPECT_TRUE(port < low || port > high) << port << " is in " << low << "-" << high;
    EXPECT_GE(port, 1024);
    EXPECT_LE(port, 65535);
    EXPECT_TRUE(seen.insert(port).second) << port << " handed out twice";
  }
  // And a daemon can listen on what it was given.
  const int port = FreePort();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << port;
  EXPECT_EQ(listen(fd, 1), 0);
  close(fd);
}

}  // namespace
}  // namespace podscope::testing
