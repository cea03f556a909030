// The shared Kineto fixture, replicated in memory to benchmark at a realistic size.
#pragma once

#include <string>

namespace podscope::bench {

// The decompressed JSON of trace_filter/sampled_rank-0 with its traceEvents array repeated
// `copies` times (same events, so the per-event work is that of a real trace). Padded for
// simdjson. Aborts with a message when the fixture is missing.
const std::string& ReplicatedKinetoJson(int copies);

}  // namespace podscope::bench
