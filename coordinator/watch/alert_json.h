// An alert as JSON: what GET /v1/alerts lists and what webhooks receive.
#pragma once

#include <string>

#include "common/json_writer.h"
#include "coordinator/watch/alert_tracker.h"

namespace podscope::coordinator::watch {

void WriteAlertJson(common::JsonWriter& out, const Alert& alert);
std::string AlertToJson(const Alert& alert);

}  // namespace podscope::coordinator::watch
