// TraceStore on RocksDB (docs/life-of-a-capture.md): column families captures, events, analyses,
// workers; big-endian keys so a capture and a worker are contiguous ranges; LZ4 for upper levels
// and ZSTD for the bottommost; WAL on, capture records synced; deletes by DeleteRange; an on-disk
// format version checked at open.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "storage/trace_store.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace podscope::storage {

inline constexpr int kStoreFormatVersion = 1;

struct RocksDbOptions {
  std::string path;
  bool create_if_missing = true;
  size_t block_cache_bytes = 64 << 20;
};

// Thread-safe (RocksDB is); owned by the coordinator's main.
class RocksDbTraceStore : public TraceStore {
 public:
  // Opens or creates the store. A directory holding something else, a store written by a newer
  // podscope, or a corrupt store is a clear error; nothing is rewritten.
  static absl::StatusOr<std::unique_ptr<RocksDbTraceStore>> Open(const RocksDbOptions& options);
  ~RocksDbTraceStore() override;

  absl::Status PutCapture(const CaptureRecord& record) override;
  absl::StatusOr<CaptureRecord> GetCapture(std::string_view id) override;
  absl::StatusOr<std::vector<CaptureRecord>> ListCaptures(const CaptureFilter& filter) override;
  std::map<std::string, std::string> UnreadableCaptures() const override;
  absl::Status PutChunk(std::string_view capture_id, uint32_t worker_index, uint64_t sequence,
                        const common::WorkerTrace& chunk) override;
  absl::Status ReadWorkers(
      std::string_view capture_id,
      const std::function<absl::Status(uint32_t, common::WorkerTrace)>& visit) override;
  absl::Status ReadWorker(std::string_view capture_id, uint32_t worker_index,
                          const std::function<absl::Status(common::WorkerTrace)>& visit) override;
  absl::Status PutAnalysis(std::string_view capture_id, std::string_view kind,
                           std::string_view value) override;
  absl::StatusOr<std::optional<std::string>> GetAnalysis(std::string_view capture_id,
                                                         std::string_view kind) override;
  absl::Status DeleteAnalysis(std::string_view capture_id, std::string_view kind) override;
  absl::Status PutSetting(std::string_view name, std::string_view value) override;
  absl::StatusOr<std::optional<std::string>> GetSetting(std::string_view name) override;
  absl::Status ForEachAnalysis(
      const std::function<void(std::string_view capture_id, std::string_view kind, uint64_t bytes)>&
          visit) override;
  absl::Status DeleteCapture(std::string_view id) override;
  absl::Status DeleteWorkerEvents(std::string_view capture_id, uint32_t worker_index) override;
  absl::StatusOr<uint64_t> ApproximateEventBytes(std::string_view capture_id) override;

  // Keys of a capture in the events and analyses column families (tests check deletes).
  size_t CountCaptureKeysForTesting(std::string_view capture_id);

 private:
  RocksDbTraceStore(rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*> handles);
  // The workers of a capture (or only `only_worker`), each decoded from all its chunks.
  absl::Status ReadEvents(std::string_view capture_id, std::optional<uint32_t> only_worker,
                          const std::function<absl::Status(uint32_t, common::WorkerTrace)>& visit);

  rocksdb::DB* db_;
  std::vector<rocksdb::ColumnFamilyHandle*>
      handles_;  // default, captures, events, analyses, workers
  mutable absl::Mutex unreadable_mu_;
  std::map<std::string, std::string> unreadable_ ABSL_GUARDED_BY(unreadable_mu_);
};

}  // namespace podscope::storage
