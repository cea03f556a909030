#include "common/trace_files.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
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

absl::StatusOr<Capture> LoadCapture(const std::vector<std::string>& files,
                                    const LoadOptions& options) {
  const size_t n = files.size();
  std::vector<std::optional<absl::StatusOr<ImportResult>>> results(n);
  std::atomic<size_t> next{0};
  absl::Mutex progress_mu;
  LoadProgress progress{0, n, 0};

  auto work = [&] {
    KinetoImporter importer(options.import);
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      results[i] = importer.ImportFile(files[i]);
      if (options.progress) {
        absl::MutexLock lock(&progress_mu);
        ++progress.files_done;
        if (results[i]->ok()) progress.bytes_done += (*results[i])->json_bytes;
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

  Capture capture;
  for (size_t i = 0; i < n; ++i) {
    if (!results[i]->ok()) return results[i]->status();
  }
  absl::flat_hash_map<int32_t, std::string> rank_source;
  for (size_t i = 0; i < n; ++i) {
    for (WorkerTrace& w : (*results[i])->workers) {
      if (w.info.rank < 0) w.info.rank = static_cast<int32_t>(capture.workers.size());
      auto [it, inserted] = rank_source.emplace(w.info.rank, files[i]);
      if (!inserted) {
        return absl::InvalidArgumentError(
            StrCat("rank ", w.info.rank, " appears in both ", it->second, " and ", files[i]));
      }
      capture.workers.push_back(std::move(w));
    }
  }
  return capture;
}

}  // namespace podscope::common
