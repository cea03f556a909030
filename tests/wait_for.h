// Waiting on a condition in tests, with a generous deadline: the one place a test polls. A test
// waits for what it expects to happen, never for a wall-clock window to pass.
#pragma once

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

namespace podscope::testing {

// How much longer than usual tests may wait: PODSCOPE_TEST_TIME_SCALE (a whole number, 1 by
// default; scripts/test.sh sets 4 for the ThreadSanitizer run, which slows everything down
// several times). Only bounds on waits scale, never what a test asserts.
inline int TimeScale() {
  static const int scale = [] {
    const char* text = std::getenv("PODSCOPE_TEST_TIME_SCALE");
    int value = 1;
    if (text != nullptr) {
      const auto [end, error] = std::from_chars(text, text + std::strlen(text), value);
      if (error != std::errc() || *end != '\0' || value < 1) value = 1;
    }
    return value;
  }();
  return scale;
}

// Polls `done` every few milliseconds until it holds or `deadline` of real time has passed;
// returns its last value. The deadline is a bound on a broken build, not a timing assertion.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds deadline = std::chrono::seconds(30),
                    std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto give_up = std::chrono::steady_clock::now() + deadline * TimeScale();
  while (!done()) {
    if (std::chrono::steady_clock::now() >= give_up) return done();
    std::this_thread::sleep_for(poll);  // polling a condition, not timing anything
  }
  return true;
}

}  // namespace podscope::testing
