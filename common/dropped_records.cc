#include "common/dropped_records.h"

#include <limits>

namespace podscope::common {

std::map<std::string, uint64_t> BoundedDroppedReasons(
    const google::protobuf::RepeatedPtrField<v1::DroppedRecords>& reported) {
  std::map<std::string, uint64_t> out;
  for (const v1::DroppedRecords& d : reported) {
    // Printable ASCII only: a cut could split a UTF-8 character (proto3 strings must be valid
    // UTF-8, or the next hop cannot parse the message), and a terminal shows what `show` prints.
    std::string reason = d.reason().substr(0, kMaxDroppedReasonBytes);
    for (char& c : reason) {
      if (c < 0x20 || c > 0x7e) c = '?';
    }
    if (!out.contains(reason) && out.size() >= kMaxDroppedReasons) reason = kOtherDroppedReason;
    uint64_t& n = out[reason];
    n = d.count() > std::numeric_limits<uint64_t>::max() - n ? std::numeric_limits<uint64_t>::max()
                                                             : n + d.count();
  }
  return out;
}

}  // namespace podscope::common
