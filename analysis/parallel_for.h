// Runs fn(i) for i in [0, n) on up to one thread per core. Per-worker analyses are
// independent, so a capture's heavy work spreads over the machine (docs/deploy.md).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace podscope::analysis {

// Blocks until every call returned. `fn` must be safe to call concurrently for different i.
template <typename Fn>
void ParallelFor(size_t n, Fn&& fn) {
  const size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), n);
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace podscope::analysis
