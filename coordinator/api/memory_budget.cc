#include "coordinator/api/memory_budget.h"

#include <algorithm>

#include "common/str_util.h"

namespace podscope::coordinator {

MemoryBudget::Grant::~Grant() {
  if (budget_ != nullptr) budget_->Release(bytes_);
}

absl::StatusOr<MemoryBudget::Grant> MemoryBudget::Acquire(uint64_t bytes) {
  bytes = std::min(bytes, budget_);
  absl::MutexLock lock(&mu_);
  const bool nobody_waits = serving_ == next_ticket_;
  if (nobody_waits && held_ + bytes <= budget_) {
    held_ += bytes;
    return Grant(this, bytes);
  }
  if (next_ticket_ - serving_ >= max_waiting_) {
    return absl::ResourceExhaustedError(
        common::StrCat("the analyses running hold the memory budget (", budget_ >> 20, " MiB) and ",
                       next_ticket_ - serving_, " more wait for it: ask again shortly"));
  }
  const uint64_t ticket = next_ticket_++;
  // Its turn: every earlier waiter has gone, and its bytes fit.
  struct Turn {
    const MemoryBudget* budget;
    uint64_t ticket, bytes;
    bool Ready() const {
      budget->mu_.AssertReaderHeld();
      return budget->serving_ == ticket && budget->held_ + bytes <= budget->budget_;
    }
  };
  const Turn turn{this, ticket, bytes};
  mu_.Await(absl::Condition(&turn, &Turn::Ready));
  ++serving_;
  held_ += bytes;
  return Grant(this, bytes);
}

void MemoryBudget::Release(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  held_ -= bytes;
}

uint64_t MemoryBudget::held() const {
  absl::MutexLock lock(&mu_);
  return held_;
}

size_t MemoryBudget::waiting() const {
  absl::MutexLock lock(&mu_);
  return next_ticket_ - serving_;
}

}  // namespace podscope::coordinator
