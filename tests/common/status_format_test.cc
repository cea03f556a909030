#include "common/status_format.h"

#include <gtest/gtest.h>

namespace podscope::common {
namespace {

TEST(StatusFormatTest, AStatusIsWrittenAsItsMessage) {
  EXPECT_EQ(fmt::format("cannot start: {}", absl::InvalidArgumentError("--http: no port")),
            "cannot start: --http: no port");
  EXPECT_EQ(fmt::format("{}", absl::OkStatus()), "OK");
  EXPECT_EQ(fmt::format("[{:>4}]", absl::OkStatus()), "[  OK]");
  // The message only: the code's name is not words a person reads.
  EXPECT_EQ(fmt::format("{}", absl::NotFoundError("no capture cap-1")), "no capture cap-1");
}

}  // namespace
}  // namespace podscope::common
