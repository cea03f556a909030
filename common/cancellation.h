// A flag that ends blocking work at once: raised by one thread (a shutdown), seen by others as a
// readable descriptor (poll, beside the socket they wait on) or by asking. Thread-safe.
#pragma once

#include <atomic>

namespace podscope::common {

class Cancellation {
 public:
  Cancellation();
  ~Cancellation();
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  // Idempotent; never blocks.
  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // Readable once cancelled (an eventfd); -1 if the system gave none (then only cancelled()).
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::atomic<bool> cancelled_{false};
};

}  // namespace podscope::common
