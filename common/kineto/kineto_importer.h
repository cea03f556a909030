// Reads PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip, into WorkerTraces.
// A file is read a block at a time and its traceEvents parsed a batch at a time
// (TraceJsonSplitter), each batch with simdjson On-Demand: no DOM, one pass, and memory for one
// batch besides the traces, whatever the file's size. Values the
// importer does not model are skipped by simdjson without recursion, so deeply nested input
// cannot exhaust the stack; the importer itself descends at most four levels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_io.h"
#include "common/kineto/trace_builder.h"
#include "common/worker_trace.h"

namespace podscope::common {

struct ImportOptions {
  ReadLimits read;
  uint64_t max_events = 200'000'000;      // per file
  size_t max_string_bytes = 1 << 20;      // any single string value
  uint32_t max_workers_per_file = 65536;  // merged podscope exports
};

struct ImportResult {
  std::vector<WorkerTrace> workers;  // one for a Kineto file; several for a podscope export
  ImportStats stats;
  uint64_t json_bytes = 0;  // size of the (decompressed) JSON text
};

// Owns a reusable simdjson parser, so importing many files reuses its buffers. One thread
// at a time; use one importer per thread to import files in parallel.
class KinetoImporter {
 public:
  explicit KinetoImporter(ImportOptions options = {});
  ~KinetoImporter();
  KinetoImporter(const KinetoImporter&) = delete;
  KinetoImporter& operator=(const KinetoImporter&) = delete;

  // Reads and imports one file. On error nothing is returned: a file is imported whole or
  // not at all. Errors name the file, the byte offset and the reason.
  absl::StatusOr<ImportResult> ImportFile(const std::string& path);

  // Imports JSON text already in memory.
  absl::StatusOr<ImportResult> ImportJson(std::string_view source_name, std::string_view json);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace podscope::common
