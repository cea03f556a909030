// Waiting on a condition in tests, with a generous deadline: the one place a test polls. A test
// waits for what it expects to happen, never for a wall-clock window to pass.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace podscope::testing {

// Polls `done` every few milliseconds until it holds or `deadline` of real time has passed;
// returns its last value. The deadline is a bound on a broken build, not a timing assertion.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds deadline = std::chrono::seconds(30),
                    std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto give_up = std::chrono::steady_clock::now() + deadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= give_up) return done();
    std::this_thread::sleep_for(poll);  // polling a condition, not timing anything
  }
  return true;
}

}  // namespace podscope::testing
