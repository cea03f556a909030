// Why a worker's records were left out ("kernels: no time", ...), as a probe or an agent reports
// it: a peer's words, so bounded before they are kept, stored and shown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "google/protobuf/repeated_ptr_field.h"
#include "podscope/v1/trace.pb.h"

namespace podscope::common {

inline constexpr size_t kMaxDroppedReasons = 16;
inline constexpr size_t kMaxDroppedReasonBytes = 120;
// Where counts beyond kMaxDroppedReasons distinct reasons go.
inline constexpr char kOtherDroppedReason[] = "other reasons";

// Sums the counts by reason (saturating), each reason cut to kMaxDroppedReasonBytes with every
// byte outside printable ASCII made '?', and the reasons after the first kMaxDroppedReasons
// distinct ones counted under kOtherDroppedReason.
std::map<std::string, uint64_t> BoundedDroppedReasons(
    const google::protobuf::RepeatedPtrField<v1::DroppedRecords>& reported);

}  // namespace podscope::common
