// Encodes a WorkerTrace into the columnar TraceChunk protobuf
// (common/proto/podscope/v1/trace.proto) and back. Agents upload chunks, the store keeps them, the
// coordinator decodes them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/worker_trace.h"

namespace podscope::v1 {
class TraceChunk;
}

namespace podscope::common {

inline constexpr uint32_t kChunkFormatVersion = 1;

struct ChunkHeader {
  std::string capture_id;
  uint32_t worker_index = 0;
  uint64_t sequence = 0;
};

// Fills `chunk` with all of `trace`. Pure; any thread.
void EncodeChunk(const WorkerTrace& trace, const ChunkHeader& header, v1::TraceChunk* chunk);
std::string EncodeChunkToBytes(const WorkerTrace& trace, const ChunkHeader& header);

// Appends the events of `chunk` to `trace`, re-interning names into trace->strings, and sets
// the worker info and clock from the chunk (every chunk of a worker carries them). A malformed
// chunk (ragged columns, bad name ids, unknown enum values, newer format) is rejected before
// anything is appended, so `trace` is never half-written.
absl::Status AppendChunk(const v1::TraceChunk& chunk, WorkerTrace* trace);

// Parses and decodes one serialized chunk into a new trace.
absl::StatusOr<WorkerTrace> DecodeChunkFromBytes(std::string_view bytes);

}  // namespace podscope::common
