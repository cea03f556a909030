// Capture records as JSON (REST responses and the CLI's online mode).
#pragma once

#include <string>
#include <vector>

#include "common/json_writer.h"
#include "storage/trace_store.h"

namespace podscope::coordinator {

void WriteCaptureJson(common::JsonWriter& w, const storage::CaptureRecord& record);
std::string CaptureListJson(const std::vector<storage::CaptureRecord>& records, bool more);

}  // namespace podscope::coordinator
