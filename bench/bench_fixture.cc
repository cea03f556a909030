#include "bench/bench_fixture.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "common/file_io.h"

namespace podscope::bench {

const std::string& ReplicatedKinetoJson(int copies) {
  static std::map<int, std::unique_ptr<std::string>> cache;
  auto& slot = cache[copies];
  if (slot) return *slot;
  std::string dir = PODSCOPE_SHARED_DATA_DIR;
  if (const char* env = std::getenv("PODSCOPE_SHARED_DATA")) dir = env;
  const std::string path = dir + "/kineto/trace_filter/sampled_rank-0.json.gz";
  auto json = common::ReadFileMaybeGzip(path);
  if (!json.ok()) {
    std::fprintf(stderr, "benchmark fixture: %s\n", std::string(json.status().message()).c_str());
    std::abort();
  }
  const size_t open = json->find('[', json->find("\"traceEvents\""));
  const size_t close = json->rfind(']');
  const std::string head = json->substr(0, open + 1);
  const std::string events = json->substr(open + 1, close - open - 1);
  const std::string tail = json->substr(close);
  auto out = std::make_unique<std::string>();
  out->reserve(head.size() + (events.size() + 1) * copies + tail.size() + common::kReadPadding);
  *out += head;
  for (int i = 0; i < copies; ++i) {
    if (i > 0) *out += ',';
    *out += events;
  }
  *out += tail;
  slot = std::move(out);
  return *slot;
}

}  // namespace podscope::bench
