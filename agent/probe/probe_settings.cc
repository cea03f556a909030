#include "agent/probe/probe_settings.h"

#include <charconv>
#include <string_view>

#include "common/step_pattern.h"

namespace podscope::agent::probe {

namespace {

// A whole positive number within [1, max], else nothing.
bool ParsePositive(std::string_view text, uint64_t max, uint64_t* out) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > max)
    return false;
  *out = value;
  return true;
}

}  // namespace

ProbeSettings SettingsFromEnvironment(const std::function<const char*(const char*)>& getenv,
                                      std::string* warnings) {
  ProbeSettings s;
  auto number = [&](const char* name, uint64_t max, uint64_t scale, auto* field) {
    const char* text = getenv(name);
    if (text == nullptr || *text == '\0') return;
    uint64_t value = 0;
    if (!ParsePositive(text, max, &value)) {
      if (!warnings->empty()) *warnings += "; ";
      *warnings += std::string(name) + "='" + text + "' ignored (want a whole number from 1 to " +
                   std::to_string(max) + ")";
      return;
    }
    *field = static_cast<std::remove_pointer_t<decltype(field)>>(value * scale);
  };
  if (const char* path = getenv("PODSCOPE_AGENT_SOCKET"); path != nullptr && *path != '\0')
    s.agent_socket = path;
  number("PODSCOPE_PROBE_RECONNECT_MS", 3'600'000, 1'000'000, &s.reconnect_interval_ns);
  number("PODSCOPE_PROBE_MAX_EVENTS", 100'000'000, 1, &s.max_events_per_window);
  number("PODSCOPE_PROBE_QUEUE_MB", 16'384, 1u << 20, &s.max_queue_bytes);
  number("PODSCOPE_CUPTI_BUFFERS", 1024, 1, &s.cupti_buffers);
  number("PODSCOPE_CUPTI_BUFFER_KB", 262'144, 1024, &s.cupti_buffer_bytes);
  if (const char* p = getenv("PODSCOPE_STEP_PATTERN"); p != nullptr && *p != '\0') {
    if (absl::StatusOr<common::StepPattern> pattern = common::StepPattern::Compile(p);
        pattern.ok()) {
      s.step_pattern = p;
    } else {
      if (!warnings->empty()) *warnings += "; ";
      *warnings += "PODSCOPE_STEP_PATTERN ignored: " + std::string(pattern.status().message());
    }
  }
  if (const char* p = getenv("PODSCOPE_CUPTI_PATH"); p != nullptr && *p != '\0') s.cupti_path = p;
  s.disabled = getenv("PODSCOPE_PROBE_DISABLE") != nullptr;
  number("PODSCOPE_WATCH_FLUSH_MS", 60'000, 1'000'000, &s.watch_flush_interval_ns);
  if (const char* t = getenv("PODSCOPE_STREAM_MS"); t != nullptr && std::string_view(t) == "0") {
    s.stream_interval_ns = 0;
  } else {
    number("PODSCOPE_STREAM_MS", 60'000, 1'000'000, &s.stream_interval_ns);
  }
  if (const char* w = getenv("PODSCOPE_WATCH"); w != nullptr && *w != '\0') {
    const std::string_view v(w);
    if (v == "0" || v == "off" || v == "false") {
      s.watch = false;
    } else if (v != "1" && v != "on" && v != "true") {
      if (!warnings->empty()) *warnings += "; ";
      *warnings += "PODSCOPE_WATCH='" + std::string(v) + "' ignored (want 0 or 1)";
    }
  }
  return s;
}

}  // namespace podscope::agent::probe
