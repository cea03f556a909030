#include "common/clock_model.h"

namespace podscope::common {

std::string_view ClockSourceName(ClockSource source) {
  switch (source) {
    case ClockSource::kNone:
      return "none";
    case ClockSource::kNetwork:
      return "network";
    case ClockSource::kCollective:
      return "collective";
  }
  return "unknown";
}

}  // namespace podscope::common
