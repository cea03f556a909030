#include "common/trace_files.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "common/str_util.h"

namespace podscope::common {
namespace {

bool IsTraceFileName(std::string_view name) {
  return std::string_view(name).ends_with(".json") || std::string_view(name).ends_with(".json.gz");
}

// "rank-2" < "rank-10": digit runs compare by value.
bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i_end = i, j_end = j;
      while (i_end < a.size() && std::isdigit(static_cast<unsigned char>(a[i_end]))) ++i_end;
      while (j_end < b.size() && std::isdigit(static_cast<unsigned char>(b[j_end]))) ++j_end;
      std::string_view na(a.data() + i, i_end - i), nb(b.data() + j, j_end - j);
      while (na.size() > 1 && na[0] == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb[0] == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = i_end;
      j = j_end;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandTraceInputs(const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::file_status status = fs::status(input, ec);
    if (ec || !fs::exists(status)) {
      return absl::NotFoundError(StrCat(input, ": no such file or directory"));
    }
    if (!fs::is_directory(status)) {
      files.push_back(input);
      continue;
    }
    std::vector<std::string> found;
    for (const fs::directory_entry& entry : fs::directory_iterator(input, ec)) {
      if (entry.is_regular_file() && IsTraceFileName(entry.path().filename().string())) {
        found.push_back(entry.path().string());
      }
    }
    if (ec) return absl::PermissionDeniedError(StrCat(input, ": ", ec.message()));
    if (found.empty()) {
      return absl::NotFoundError(StrCat(input, ": no *.json or *.json.gz trace files"));
    }
    std::sort(found.begin(), found.end(), NaturalLess);
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

namespace {

// Imports every file, a thread per core (at most one per file), handing each file's result to
// `keep` on the thread that imported it, so that what is kept of a file, not the file, is what
// waits for the others. All or nothing: the first failing file, in input order, is the error.
template <typename Kept>
absl::StatusOr<std::vector<Kept>> ImportEach(const std::vector<std::string>& files,
                                             const LoadOptions& options,
                                             const std::function<Kept(ImportResult)>& keep) {
  const size_t n = files.size();
  std::vector<std::optional<absl::StatusOr<Kept>>> results(n);
  std::atomic<size_t> next{0};
  absl::Mutex progress_mu;
  LoadProgress progress{0, n, 0};

  auto work = [&] {
    KinetoImporter importer(options.import);
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      absl::StatusOr<ImportResult> imported = importer.ImportFile(files[i]);
      const uint64_t bytes = imported.ok() ? imported->json_bytes : 0;
      if (imported.ok()) {
        results[i] = keep(*std::move(imported));
      } else {
        results[i] = imported.status();
      }
      if (options.progress) {
        absl::MutexLock lock(&progress_mu);
        ++progress.files_done;
        progress.bytes_done += bytes;
        options.progress(progress);
      }
    }
  };
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>(options.threads > 0 ? options.threads : hw, n);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();

  std::vector<Kept> kept;
  kept.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!results[i]->ok()) return results[i]->status();
    kept.push_back(**std::move(results[i]));
  }
  return kept;
}

// Workers without a rank in their trace get their position among all the files' workers; two
// workers claiming one rank is an error naming both files.
absl::Status AssignRanks(const std::vector<std::string>& files,
                         const std::vector<std::vector<int32_t*>>& ranks) {
  absl::flat_hash_map<int32_t, std::string> rank_source;
  int32_t position = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    for (int32_t* rank : ranks[i]) {
      if (*rank < 0) *rank = position;
      ++position;
      auto [it, inserted] = rank_source.emplace(*rank, files[i]);
      if (!inserted) {
        return absl::InvalidArgumentError(
            StrCat("rank ", *rank, " appears in both ", it->second, " and ", files[i]));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Capture> LoadCapture(const std::vector<std::string>& files,
                                    const LoadOptions& options) {
  ASSIGN_OR_RETURN(std::vector<std::vector<WorkerTrace>> imported,
                   ImportEach<std::vector<WorkerTrace>>(
                       files, options, [](ImportResult r) { return std::move(r.workers); }));
  std::vector<std::vector<int32_t*>> ranks(imported.size());
  for (size_t i = 0; i < imported.size(); ++i) {
    for (WorkerTrace& w : imported[i]) ranks[i].push_back(&w.info.rank);
  }
  RETURN_IF_ERROR(AssignRanks(files, ranks));
  Capture capture;
  for (std::vector<WorkerTrace>& file : imported) {
    for (WorkerTrace& w : file) capture.workers.push_back(std::move(w));
  }
  return capture;
}

absl::StatusOr<PackedWorkers> LoadPackedWorkers(const std::vector<std::string>& files,
                                                const LoadOptions& options) {
  ASSIGN_OR_RETURN(std::vector<std::vector<PackedWorker>> imported,
                   ImportEach<std::vector<PackedWorker>>(files, options, [](ImportResult r) {
                     std::vector<PackedWorker> packed;
                     for (WorkerTrace& w : r.workers) {
                       packed.push_back(PackWorker(w));
                       w = WorkerTrace();  // gone before the next is packed
                     }
                     return packed;
                   }));
  std::vector<std::vector<int32_t*>> ranks(imported.size());
  for (size_t i = 0; i < imported.size(); ++i) {
    for (PackedWorker& w : imported[i]) ranks[i].push_back(&w.rank);
  }
  RETURN_IF_ERROR(AssignRanks(files, ranks));
  PackedWorkers workers;
  for (std::vector<PackedWorker>& file : imported) {
    for (PackedWorker& w : file) workers.Add(std::move(w));
  }
  return workers;
}

}  // namespace podscope::common
