// Heavy analyses hold memory in proportion to the worker they read. A MemoryBudget lets them run
// together only while the sum of their estimates fits: one that does not fit waits its turn (in
// arrival order, so a large one is not overtaken forever), while at most `max_waiting` wait; the
// next is refused, and the API answers 503 with Retry-After. One estimated above the whole
// budget runs alone, once nothing else holds any. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace podscope::coordinator {

class MemoryBudget {
 public:
  MemoryBudget(uint64_t budget_bytes, size_t max_waiting)
      : budget_(budget_bytes), max_waiting_(max_waiting) {}

  // Holds its bytes until destroyed.
  class Grant {
   public:
    Grant(Grant&& other) noexcept : budget_(other.budget_), bytes_(other.bytes_) {
      other.budget_ = nullptr;
    }
    Grant& operator=(Grant&&) = delete;
    ~Grant();
    uint64_t bytes() const { return bytes_; }

   private:
    friend class MemoryBudget;
    Grant(MemoryBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    MemoryBudget* budget_;
    uint64_t bytes_;
  };

  // Waits until `bytes` (at most the whole budget) fit beside what others hold and every earlier
  // waiter has gone; ResourceExhausted, at once, when max_waiting already wait.
  absl::StatusOr<Grant> Acquire(uint64_t bytes);

  uint64_t budget() const { return budget_; }
  uint64_t held() const;
  size_t waiting() const;

 private:
  void Release(uint64_t bytes);

  const uint64_t budget_;
  const size_t max_waiting_;
  mutable absl::Mutex mu_;
  uint64_t held_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;  // given to each that must wait
  uint64_t serving_ ABSL_GUARDED_BY(mu_) = 0;      // the waiter whose turn it is
};

}  // namespace podscope::coordinator
