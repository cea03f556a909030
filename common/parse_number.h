// Numbers from users and peers (query parameters, flags, environment): the whole text must be
// the number, with no sign, space or suffix std::sto* would let through, and no exception.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace podscope::common {

// A base-10 integer ("-12", "40"); InvalidArgument naming the text otherwise (overflow too).
absl::StatusOr<int64_t> ParseInt(std::string_view text);
// A finite decimal number ("1.5", "-2e3"); "nan", "inf" and overflow are InvalidArgument.
absl::StatusOr<double> ParseDouble(std::string_view text);

}  // namespace podscope::common
