#include "common/worker_source.h"

#include "common/status_macros.h"

namespace podscope::common {

absl::Status ViewWorkers::ForEachWorker(
    const std::function<absl::Status(const WorkerTrace& trace)>& visit) {
  for (const WorkerTrace* worker : view_.workers()) RETURN_IF_ERROR(visit(*worker));
  return absl::OkStatus();
}

}  // namespace podscope::common
