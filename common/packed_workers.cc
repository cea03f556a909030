#include "common/packed_workers.h"

#include <zstd.h>

#include <algorithm>
#include <numeric>

#include "common/chunk_codec.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "common/trace_slice.h"
#include "podscope/v1/trace.pb.h"

namespace podscope::common {
namespace {

// zstd's fastest level: packing runs once per worker and must not be what a load waits on; the
// columns shrink about tenfold even so.
constexpr int kPackLevel = 1;
// A chunk unpacks to at most this: far above any chunk PackWorker makes, and a bound on what
// bytes that claim more may make us allocate.
constexpr uint64_t kMaxUnpackedChunkBytes = 1ull << 30;

}  // namespace

uint64_t PackedWorker::bytes() const {
  uint64_t total = 0;
  for (const std::string& c : chunks) total += c.size();
  return total;
}

PackedWorker PackWorker(const WorkerTrace& trace, size_t chunk_events) {
  PackedWorker packed;
  packed.rank = trace.info.rank;
  packed.events = trace.Counts().Total();
  v1::TraceChunk chunk;
  std::string encoded;
  (void)ForEachChunk(trace, chunk_events, [&](WorkerTrace piece) {
    chunk.Clear();
    EncodeChunk(piece, ChunkHeader{}, &chunk);
    encoded.clear();
    chunk.SerializeToString(&encoded);
    std::string& out = packed.chunks.emplace_back();
    out.resize(ZSTD_compressBound(encoded.size()));
    const size_t n =
        ZSTD_compress(out.data(), out.size(), encoded.data(), encoded.size(), kPackLevel);
    // Compressing into a buffer of ZSTD_compressBound cannot fail.
    out.resize(ZSTD_isError(n) ? 0 : n);
    out.shrink_to_fit();
    return absl::OkStatus();
  });
  return packed;
}

absl::StatusOr<WorkerTrace> UnpackWorker(const PackedWorker& packed) {
  WorkerTrace trace;
  std::string encoded;
  v1::TraceChunk chunk;
  for (size_t i = 0; i < packed.chunks.size(); ++i) {
    const std::string& c = packed.chunks[i];
    const unsigned long long size = ZSTD_getFrameContentSize(c.data(), c.size());
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN ||
        size > kMaxUnpackedChunkBytes) {
      return absl::DataLossError(StrCat("packed chunk ", i, " of rank ", packed.rank,
                                        " is not a zstd frame of a known size"));
    }
    encoded.resize(size);
    const size_t n = ZSTD_decompress(encoded.data(), encoded.size(), c.data(), c.size());
    if (ZSTD_isError(n) || n != size) {
      return absl::DataLossError(StrCat("packed chunk ", i, " of rank ", packed.rank,
                                        " does not decompress: ", ZSTD_getErrorName(n)));
    }
    if (!chunk.ParseFromString(encoded)) {
      return absl::DataLossError(
          StrCat("packed chunk ", i, " of rank ", packed.rank, " is not a trace chunk"));
    }
    RETURN_IF_ERROR(AppendChunk(chunk, &trace));
  }
  return trace;
}

uint64_t PackedWorkers::bytes() const {
  uint64_t total = 0;
  for (const PackedWorker& w : workers_) total += w.bytes();
  return total;
}

absl::Status PackedWorkers::ForEachWorker(
    const std::function<absl::Status(const WorkerTrace& trace)>& visit) {
  std::vector<size_t> order(workers_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [this](size_t a, size_t b) { return workers_[a].rank < workers_[b].rank; });
  for (size_t i : order) {
    ASSIGN_OR_RETURN(WorkerTrace trace, UnpackWorker(workers_[i]));
    // The rank it was given when loaded (files without one get their position).
    trace.info.rank = workers_[i].rank;
    RETURN_IF_ERROR(visit(trace));
  }
  return absl::OkStatus();
}

}  // namespace podscope::common
