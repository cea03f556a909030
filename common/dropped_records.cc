#include "common/dropped_records.h"

#include <limits>

namespace podscope::common {

std::map<std::string, uint64_t> BoundedDroppedReasons(
    const google::protobuf::RepeatedPtrField<v1::DroppedRecords>& reported) {
  std::map<std::string, uint64_t> out;
  for (const v1::DroppedRecords& d : reported) {
    std::string reason = d.reason().substr(0, kMaxDroppedReasonBytes);
    if (!out.contains(reason) && out.size() >= kMaxDroppedReasons) reason = kOtherDroppedReason;
    uint64_t& n = out[reason];
    n = d.count() > std::numeric_limits<uint64_t>::max() - n ? std::numeric_limits<uint64_t>::max()
                                                             : n + d.count();
  }
  return out;
}

}  // namespace podscope::common
