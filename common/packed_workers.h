// Workers held packed in memory (each as its encoded trace chunks, compressed) and unpacked one at
// a time: how `podscope analyze` reads trace files far larger than memory would hold decoded. A
// dense rank's 5 s is 1.6 M events, half a gigabyte of JSON and a hundred megabytes decoded;
// packed it is a few bytes an event, so a reader's memory is one decoded worker plus the packs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/worker_source.h"
#include "common/worker_trace.h"

namespace podscope::common {

// One worker's events, packed. Pure data: made on any thread, moved freely.
struct PackedWorker {
  int32_t rank = -1;  // the worker's rank as its info says (-1: none given)
  uint64_t events = 0;
  std::vector<std::string> chunks;  // zstd-compressed TraceChunk protobufs, in order
  uint64_t bytes() const;
};

// Packs `trace` a chunk of at most `chunk_events` events at a time (never a second copy of the
// whole worker).
PackedWorker PackWorker(const WorkerTrace& trace, size_t chunk_events = 1 << 18);
// The worker back, exactly as packed. Errors for bytes that are not a packed worker.
absl::StatusOr<WorkerTrace> UnpackWorker(const PackedWorker& packed);

// Packed workers as a source: visits them unpacked, one at a time, in a CaptureView's order (by
// rank, ties in the order added).
class PackedWorkers final : public WorkerSource {
 public:
  void Add(PackedWorker worker) { workers_.push_back(std::move(worker)); }
  size_t size() const { return workers_.size(); }
  const std::vector<PackedWorker>& workers() const { return workers_; }
  std::vector<PackedWorker>& mutable_workers() { return workers_; }
  uint64_t bytes() const;

  absl::Status ForEachWorker(
      const std::function<absl::Status(const WorkerTrace& trace)>& visit) override;

 private:
  std::vector<PackedWorker> workers_;
};

}  // namespace podscope::common
