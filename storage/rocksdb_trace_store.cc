#include "storage/rocksdb_trace_store.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/options_util.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "common/chunk_codec.h"
#include "common/parse_number.h"
#include "common/status_macros.h"
#include "common/str_util.h"
#include "podscope/v1/capture.pb.h"
#include "podscope/v1/trace.pb.h"

// Turns a rocksdb::Status into an absl::Status naming the call.
#define ROCKSDB_CALL(expr)                                                      \
  do {                                                                          \
    const ::rocksdb::Status podscope_rocksdb_status_ = (expr);                  \
    if (!podscope_rocksdb_status_.ok())                                         \
      return ::podscope::storage::FromRocksDb(#expr, podscope_rocksdb_status_); \
  } while (false)

namespace podscope::storage {

absl::Status FromRocksDb(std::string_view call, const rocksdb::Status& s) {
  const std::string message = common::StrCat("rocksdb ", call, ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(message);
  if (s.IsCorruption()) return absl::DataLossError(message);
  if (s.IsInvalidArgument()) return absl::FailedPreconditionError(message);
  if (s.IsIOError() || s.IsNoSpace()) return absl::UnavailableError(message);
  return absl::InternalError(message);
}

namespace {

constexpr const char* kFamilies[] = {"default", "captures", "events", "analyses", "workers"};
enum Family { kDefault = 0, kCaptures, kEvents, kAnalyses, kWorkers };
constexpr const char* kFormatKey = "podscope_format_version";

// capture id, then a 0 byte: ids never hold a 0 byte, so [id\0, id\1) is exactly one capture.
std::string CapturePrefix(std::string_view id) {
  std::string key(id);
  key.push_back('\0');
  return key;
}
std::string CaptureEnd(std::string_view id) {
  std::string key(id);
  key.push_back('\1');
  return key;
}

void AppendBigEndian(std::string* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t ReadBigEndian(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string EventKey(std::string_view id, uint32_t worker, uint64_t sequence) {
  std::string key = CapturePrefix(id);
  AppendBigEndian(&key, worker, 4);
  AppendBigEndian(&key, sequence, 8);
  return key;
}

rocksdb::ColumnFamilyOptions FamilyOptions(const RocksDbOptions& options, int family) {
  rocksdb::ColumnFamilyOptions cf;
  if (family == kEvents) cf.OptimizeLevelStyleCompaction();
  // LZ4 for the upper levels (fast), ZSTD for the bottommost (where most bytes end up). The
  // optimisation above leaves the first levels uncompressed, level by level, which would
  // override these: a chunk's columns shrink 9x under LZ4, 18x under ZSTD.
  cf.compression_per_level.clear();
  cf.compression = rocksdb::kLZ4Compression;
  cf.bottommost_compression = rocksdb::kZSTD;
  return cf;
}

v1::CaptureRecord ToProto(const CaptureRecord& r) {
  v1::CaptureRecord p;
  p.set_id(r.id);
  p.set_job(r.job);
  p.set_state(static_cast<uint32_t>(r.state));
  p.set_created_ns(r.created_ns);
  p.set_updated_ns(r.updated_ns);
  p.set_events(r.events);
  p.set_stored_bytes(r.stored_bytes);
  p.set_error(r.error);
  p.set_generation(r.generation);
  p.set_window_start_ns(r.window_start_ns);
  p.set_window_duration_ns(r.window_duration_ns);
  for (const WorkerRecord& w : r.workers) {
    v1::WorkerRecord* o = p.add_workers();
    o->set_worker_index(w.worker_index);
    o->set_rank(w.rank);
    o->set_host(w.host);
    o->set_source(w.source);
    o->set_events(w.events);
    o->set_chunks(w.chunks);
    o->set_state(w.state);
    o->set_agent_id(w.agent_id);
    if (w.clock.source != common::ClockSource::kNone) {
      v1::ClockModel* c = o->mutable_clock();
      c->set_offset_ns(w.clock.offset_ns);
      c->set_drift_ppb(w.clock.drift_ppb);
      c->set_reference_ns(w.clock.reference_ns);
      c->set_error_bound_ns(w.clock.error_bound_ns);
      c->set_source(static_cast<uint32_t>(w.clock.source));
    }
    o->set_actual_start_ns(w.actual_start_ns);
    o->set_actual_stop_ns(w.actual_stop_ns);
    o->set_dropped_events(w.dropped_events);
    for (const auto& [reason, n] : w.dropped_reasons) {
      v1::DroppedRecords* d = o->add_dropped_reasons();
      d->set_reason(reason);
      d->set_count(n);
    }
    o->set_error(w.error);
    o->set_acknowledged_ns(w.acknowledged_ns);
  }
  return p;
}

absl::StatusOr<CaptureRecord> FromProto(std::string_view bytes) {
  v1::CaptureRecord p;
  if (!p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) ||
      p.state() >= kCaptureStateCount) {
    return absl::DataLossError("a capture record in the store does not parse");
  }
  CaptureRecord r;
  r.id = p.id();
  r.job = p.job();
  r.state = static_cast<CaptureState>(p.state());
  r.created_ns = p.created_ns();
  r.updated_ns = p.updated_ns();
  r.events = p.events();
  r.stored_bytes = p.stored_bytes();
  r.error = p.error();
  r.generation = p.generation();
  r.window_start_ns = p.window_start_ns();
  r.window_duration_ns = p.window_duration_ns();
  for (const v1::WorkerRecord& w : p.workers()) {
    WorkerRecord& o = r.workers.emplace_back();
    o.worker_index = w.worker_index();
    o.rank = w.rank();
    o.host = w.host();
    o.source = w.source();
    o.events = w.events();
    o.chunks = w.chunks();
    o.state = w.state();
    o.agent_id = w.agent_id();
    if (w.has_clock()) {
      if (w.clock().source() > static_cast<uint32_t>(common::ClockSource::kCollective)) {
        return absl::DataLossError("a capture record in the store has an unknown clock source");
      }
      o.clock = common::ClockModel{w.clock().offset_ns(), w.clock().drift_ppb(),
                                   w.clock().reference_ns(), w.clock().error_bound_ns(),
                                   static_cast<common::ClockSource>(w.clock().source())};
    }
    o.actual_start_ns = w.actual_start_ns();
    o.actual_stop_ns = w.actual_stop_ns();
    o.dropped_events = w.dropped_events();
    for (const v1::DroppedRecords& d : w.dropped_reasons())
      o.dropped_reasons[d.reason()] += d.count();
    o.error = w.error();
    o.acknowledged_ns = w.acknowledged_ns();
  }
  return r;
}

rocksdb::WriteOptions Synced() {
  rocksdb::WriteOptions w;
  w.sync = true;
  return w;
}

#if defined(__SANITIZE_THREAD__)
#define PODSCOPE_STORE_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PODSCOPE_STORE_UNDER_TSAN 1
#endif
#endif
#ifdef PODSCOPE_STORE_UNDER_TSAN
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

// Every write goes through here. RocksDB groups concurrent writes: one writer, the group's
// leader, appends the others' batches to its own and writes them all, and the batches change
// hands through atomics inside the library, which TSan cannot see (Debian's RocksDB is not built
// with it). That append runs the std::string code compiled into our binaries, and no frame of
// RocksDB's is on TSan's stacks, so neither called_from_lib nor a frame suppression reaches it.
// Under TSan the write itself is therefore hidden from it; what goes into a batch is built, and
// checked, before.
rocksdb::Status Commit(rocksdb::DB& db, const rocksdb::WriteOptions& options,
                       rocksdb::WriteBatch& batch) {
#ifdef PODSCOPE_STORE_UNDER_TSAN
  __tsan_ignore_thread_begin();
  const rocksdb::Status s = db.Write(options, &batch);
  __tsan_ignore_thread_end();
  return s;
#else
  return db.Write(options, &batch);
#endif
}

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbTraceStore>> RocksDbTraceStore::Open(
    const RocksDbOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool exists = fs::exists(fs::path(options.path) / "CURRENT", ec);
  if (!exists && fs::exists(options.path, ec) && !fs::is_empty(options.path, ec)) {
    return absl::FailedPreconditionError(common::StrCat(
        options.path,
        " is not empty and holds no RocksDB store: refusing to create a podscope store there"));
  }
  if (exists) {
    std::vector<std::string> families;
    ROCKSDB_CALL(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), options.path, &families));
    for (const char* name : kFamilies) {
      if (std::find(families.begin(), families.end(), name) == families.end()) {
        return absl::FailedPreconditionError(common::StrCat(
            options.path, " is a RocksDB database but not a podscope store (no column family \"",
            name, "\")"));
      }
    }
  } else if (!options.create_if_missing) {
    return absl::NotFoundError(common::StrCat("no podscope store at ", options.path));
  }

  rocksdb::DBOptions db_options;
  db_options.create_if_missing = options.create_if_missing;
  db_options.create_missing_column_families = !exists;
  db_options.paranoid_checks = true;
  db_options.IncreaseParallelism(2);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (int i = 0; i < 5; ++i) descriptors.emplace_back(kFamilies[i], FamilyOptions(options, i));
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  if (const rocksdb::Status opened =
          rocksdb::DB::Open(db_options, options.path, descriptors, &handles, &db);
      !opened.ok()) {
    // RocksDB's own words ("While lock file: .../LOCK: Resource temporarily unavailable") do not
    // say what to do; the usual cause is a second coordinator on the same directory.
    if (opened.IsIOError() && opened.ToString().find("lock") != std::string::npos) {
      return absl::FailedPreconditionError(
          common::StrCat("the data directory ", options.path,
                         " is in use (another podscope-coordinator running on it?): stop that one "
                         "or give this one another --data-dir (",
                         opened.ToString(), ")"));
    }
    return FromRocksDb("rocksdb::DB::Open", opened);
  }
  std::unique_ptr<RocksDbTraceStore> store(new RocksDbTraceStore(db, std::move(handles)));

  std::string version;
  const rocksdb::Status s =
      db->Get(rocksdb::ReadOptions(), store->handles_[kDefault], kFormatKey, &version);
  if (s.IsNotFound()) {
    if (exists) {
      return absl::DataLossError(
          common::StrCat(options.path, ": podscope store without a format version (corrupt?)"));
    }
    rocksdb::WriteBatch batch;
    ROCKSDB_CALL(
        batch.Put(store->handles_[kDefault], kFormatKey, std::to_string(kStoreFormatVersion)));
    ROCKSDB_CALL(Commit(*db, Synced(), batch));
  } else {
    ROCKSDB_CALL(s);
    const absl::StatusOr<int64_t> parsed = common::ParseInt(version);
    if (!parsed.ok() || *parsed < 0 || *parsed > INT32_MAX) {
      return absl::DataLossError(
          common::StrCat(options.path, ": unreadable store format version \"", version, "\""));
    }
    const int64_t found = *parsed;
    if (found > kStoreFormatVersion) {
      return absl::FailedPreconditionError(
          common::StrCat(options.path, " was written by a newer podscope (store format ", found,
                         "; this build reads up to ", kStoreFormatVersion, ")"));
    }
  }
  return store;
}

RocksDbTraceStore::RocksDbTraceStore(rocksdb::DB* db,
                                     std::vector<rocksdb::ColumnFamilyHandle*> handles)
    : db_(db), handles_(std::move(handles)) {}

RocksDbTraceStore::~RocksDbTraceStore() {
  // What is still in memtables lives in the write-ahead log uncompressed; written out, a store at
  // rest is its compressed tables alone. (A failure leaves the log, which the next open replays.)
  (void)db_->Flush(rocksdb::FlushOptions(), handles_);
  for (rocksdb::ColumnFamilyHandle* h : handles_) db_->DestroyColumnFamilyHandle(h);
  db_->Close();
  delete db_;
}

absl::Status RocksDbTraceStore::PutCapture(const CaptureRecord& record) {
  RETURN_IF_ERROR(ValidateCaptureId(record.id));
  // Synced: the WAL is sequential, so this also makes every chunk written before it durable.
  rocksdb::WriteBatch batch;
  ROCKSDB_CALL(batch.Put(handles_[kCaptures], record.id, ToProto(record).SerializeAsString()));
  ROCKSDB_CALL(Commit(*db_, Synced(), batch));
  return absl::OkStatus();
}

absl::StatusOr<CaptureRecord> RocksDbTraceStore::GetCapture(std::string_view id) {
  RETURN_IF_ERROR(ValidateCaptureId(id));
  std::string value;
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), handles_[kCaptures],
                                     rocksdb::Slice(id.data(), id.size()), &value);
  if (s.IsNotFound()) return absl::NotFoundError(common::StrCat("no capture \"", id, "\""));
  ROCKSDB_CALL(s);
  absl::StatusOr<CaptureRecord> record = FromProto(value);
  if (record.ok() && record->id != id)
    record = absl::DataLossError("the record stored under this id is another capture's");
  if (!record.ok())
    return absl::DataLossError(
        common::StrCat("capture ", id, ": ", record.status().message(), "; delete it to drop it"));
  return record;
}

absl::StatusOr<std::vector<CaptureRecord>> RocksDbTraceStore::ListCaptures(
    const CaptureFilter& filter) {
  std::vector<CaptureRecord> out;
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), handles_[kCaptures]));
  if (filter.after_id.empty()) {
    it->SeekToFirst();
  } else {
    it->Seek(filter.after_id);
    if (it->Valid() && it->key().ToStringView() == filter.after_id) it->Next();
  }
  for (; it->Valid() && out.size() < filter.limit; it->Next()) {
    absl::StatusOr<CaptureRecord> decoded = FromProto(it->value().ToStringView());
    // A record is its key's: one that decodes to another id (or none) would be listed twice, or
    // under an id no call can reach.
    if (decoded.ok() && decoded->id != it->key().ToStringView()) {
      decoded =
          absl::DataLossError(common::StrCat("the record stored under this id is capture \"",
                                             absl::CHexEscape(decoded->id.substr(0, 64)), "\""));
    }
    if (!decoded.ok()) {
      absl::MutexLock lock(&unreadable_mu_);
      if (unreadable_.size() < 1024)
        unreadable_.emplace(it->key().ToString(), std::string(decoded.status().message()));
      continue;
    }
    CaptureRecord record = *std::move(decoded);
    if (!filter.job.empty() && record.job != filter.job) continue;
    if (filter.state && record.state != *filter.state) continue;
    out.push_back(std::move(record));
  }
  ROCKSDB_CALL(it->status());
  return out;
}

absl::Status RocksDbTraceStore::PutChunk(std::string_view capture_id, uint32_t worker_index,
                                         uint64_t sequence, const common::WorkerTrace& chunk) {
  RETURN_IF_ERROR(ValidateCaptureId(capture_id));
  const std::string bytes = common::EncodeChunkToBytes(
      chunk, common::ChunkHeader{std::string(capture_id), worker_index, sequence});
  rocksdb::WriteBatch batch;
  ROCKSDB_CALL(batch.Put(handles_[kEvents], EventKey(capture_id, worker_index, sequence), bytes));
  ROCKSDB_CALL(Commit(*db_, rocksdb::WriteOptions(), batch));
  return absl::OkStatus();
}

absl::Status RocksDbTraceStore::ReadWorkers(
    std::string_view capture_id,
    const std::function<absl::Status(uint32_t, common::WorkerTrace)>& visit) {
  return ReadEvents(capture_id, std::nullopt, visit);
}

absl::Status RocksDbTraceStore::ReadWorker(
    std::string_view capture_id, uint32_t worker_index,
    const std::function<absl::Status(common::WorkerTrace)>& visit) {
  return ReadEvents(capture_id, worker_index, [&visit](uint32_t, common::WorkerTrace trace) {
    return visit(std::move(trace));
  });
}

// The largest chunk whose parsed columns a reading thread keeps for the next.
constexpr size_t kMaxKeptChunkBytes = 8 << 20;

absl::Status RocksDbTraceStore::ReadEvents(
    std::string_view capture_id, std::optional<uint32_t> only_worker,
    const std::function<absl::Status(uint32_t, common::WorkerTrace)>& visit) {
  RETURN_IF_ERROR(ValidateCaptureId(capture_id));
  const std::string prefix = CapturePrefix(capture_id);
  std::string start = prefix, end = CaptureEnd(capture_id);
  if (only_worker) {
    AppendBigEndian(&start, *only_worker, 4);
    end = prefix;
    AppendBigEndian(&end, uint64_t{*only_worker} + 1, 4);
    if (*only_worker == UINT32_MAX) end = CaptureEnd(capture_id);
  }
  rocksdb::ReadOptions read;
  const rocksdb::Slice upper(end);
  read.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, handles_[kEvents]));
  std::optional<uint32_t> current;
  common::WorkerTrace trace;
  // Parsing into a message that held a chunk before reuses its columns' capacity instead of
  // growing them again, a third of decoding's time; kept per thread up to a bound.
  thread_local v1::TraceChunk chunk;
  struct Trim {
    ~Trim() {
      if (chunk.SpaceUsedLong() > kMaxKeptChunkBytes) chunk = v1::TraceChunk();
    }
  } trim;
  for (it->Seek(start); it->Valid(); it->Next()) {
    const std::string_view key = it->key().ToStringView();
    if (key.size() != prefix.size() + 12)
      return absl::DataLossError("malformed event key in the store");
    const auto worker = static_cast<uint32_t>(ReadBigEndian(key.data() + prefix.size(), 4));
    if (current && *current != worker) {
      trace.SortByTime();
      RETURN_IF_ERROR(visit(*current, std::move(trace)));
      trace = common::WorkerTrace();
    }
    current = worker;
    const std::string_view value = it->value().ToStringView();
    if (!chunk.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      return absl::DataLossError(common::StrCat("capture ", capture_id, " worker ", worker,
                                                ": a stored chunk does not parse"));
    }
    RETURN_IF_ERROR(common::AppendChunk(chunk, &trace));
  }
  ROCKSDB_CALL(it->status());
  if (current) {
    trace.SortByTime();
    RETURN_IF_ERROR(visit(*current, std::move(trace)));
  }
  return absl::OkStatus();
}

absl::Status RocksDbTraceStore::PutAnalysis(std::string_view capture_id, std::string_view kind,
                                            std::string_view value) {
  RETURN_IF_ERROR(ValidateCaptureId(capture_id));
  rocksdb::WriteBatch batch;
  ROCKSDB_CALL(batch.Put(handles_[kAnalyses], common::StrCat(CapturePrefix(capture_id), kind),
                         rocksdb::Slice(value.data(), value.size())));
  ROCKSDB_CALL(Commit(*db_, rocksdb::WriteOptions(), batch));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> RocksDbTraceStore::GetAnalysis(
    std::string_view capture_id, std::string_view kind) {
  RETURN_IF_ERROR(ValidateCaptureId(capture_id));
  std::string value;
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), handles_[kAnalyses],
                                     common::StrCat(CapturePrefix(capture_id), kind), &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  ROCKSDB_CALL(s);
  return std::optional<std::string>(std::move(value));
}

absl::Status RocksDbTraceStore::DeleteAnalysis(std::string_view capture_id, std::string_view kind) {
  RETURN_IF_ERROR(ValidateCaptureId(capture_id));
  rocksdb::WriteBatch batch;
  ROCKSDB_CALL(batch.Delete(handles_[kAnalyses], common::StrCat(CapturePrefix(capture_id), kind)));
  ROCKSDB_CALL(Commit(*db_, rocksdb::WriteOptions(), batch));
  return absl::OkStatus();
}

namespace {

constexpr size_t kMaxSettingBytes = 1 << 20;

// Settings live in the default family beside the format key, under their own prefix.
absl::StatusOr<std::string> SettingKey(std::string_view name) {
  const bool ok =
      !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
      });
  if (!ok) return absl::InvalidArgumentError("a setting's name is 1-64 characters of [a-z0-9_.-]");
  return common::StrCat("settings/", name);
}

}  // namespace

absl::Status RocksDbTraceStore::PutSetting(std::string_view name, std::string_view value) {
  ASSIGN_OR_RETURN(std::string key, SettingKey(name));
  if (value.size() > kMaxSettingBytes) {
    return absl::InvalidArgumentError(
        common::StrCat("setting ", name, " is larger than ", kMaxSettingBytes, " bytes"));
  }
  rocksdb::WriteBatch batch;
  ROCKSDB_CALL(batch.Put(handles_[kDefault], key, rocksdb::Slice(value.data(), value.size())));
  ROCKSDB_CALL(Commit(*db_, Synced(), batch));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> RocksDbTraceStore::GetSetting(std::string_view name) {
  ASSIGN_OR_RETURN(std::string key, SettingKey(name));
  std::string value;
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), handles_[kDefault], key, &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  ROCKSDB_CALL(s);
  return std::optional<std::string>(std::move(value));
}

absl::Status RocksDbTraceStore::ForEachAnalysis(
    const std::function<void(std::string_view capture_id, std::string_view kind, uint64_t bytes)>&
        visit) {
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), handles_[kAnalyses]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    const size_t split = key.find('\0');
    if (split == std::string_view::npos) continue;
    visit(key.substr(0, split), key.substr(split + 1), it->value().size());
  }
  ROCKSDB_CALL(it->status());
  return absl::OkStatus();
}

std::map<std::string, std::string> RocksDbTraceStore::UnreadableCaptures() const {
  absl::MutexLock lock(&unreadable_mu_);
  return unreadable_;
}

absl::Status RocksDbTraceStore::DeleteCapture(std::string_view id) {
  RETURN_IF_ERROR(ValidateCaptureId(id));
  {
    absl::MutexLock lock(&unreadable_mu_);
    unreadable_.erase(std::string(id));
  }
  rocksdb::WriteBatch batch;
  ROCKSDB_CALL(batch.Delete(handles_[kCaptures], rocksdb::Slice(id.data(), id.size())));
  ROCKSDB_CALL(batch.DeleteRange(handles_[kEvents], CapturePrefix(id), CaptureEnd(id)));
  ROCKSDB_CALL(batch.DeleteRange(handles_[kAnalyses], CapturePrefix(id), CaptureEnd(id)));
  ROCKSDB_CALL(Commit(*db_, Synced(), batch));
  return absl::OkStatus();
}

absl::Status RocksDbTraceStore::DeleteWorkerEvents(std::string_view capture_id,
                                                   uint32_t worker_index) {
  RETURN_IF_ERROR(ValidateCaptureId(capture_id));
  std::string start = CapturePrefix(capture_id);
  std::string end = start;
  AppendBigEndian(&start, worker_index, 4);
  if (worker_index == UINT32_MAX) {
    end = CaptureEnd(capture_id);
  } else {
    AppendBigEndian(&end, uint64_t{worker_index} + 1, 4);
  }
  rocksdb::WriteBatch batch;
  ROCKSDB_CALL(batch.DeleteRange(handles_[kEvents], start, end));
  ROCKSDB_CALL(Commit(*db_, rocksdb::WriteOptions(), batch));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> RocksDbTraceStore::ApproximateEventBytes(std::string_view capture_id) {
  RETURN_IF_ERROR(ValidateCaptureId(capture_id));
  const std::string start = CapturePrefix(capture_id);
  const std::string end = CaptureEnd(capture_id);
  rocksdb::Range range(start, end);
  uint64_t size = 0;
  rocksdb::SizeApproximationOptions options;
  options.include_memtables = true;
  options.include_files = true;
  ROCKSDB_CALL(db_->GetApproximateSizes(options, handles_[kEvents], &range, 1, &size));
  return size;
}

size_t RocksDbTraceStore::CountCaptureKeysForTesting(std::string_view capture_id) {
  size_t n = 0;
  for (int family : {kEvents, kAnalyses}) {
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), handles_[family]));
    const std::string prefix = CapturePrefix(capture_id);
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) ++n;
  }
  return n;
}

}  // namespace podscope::storage
