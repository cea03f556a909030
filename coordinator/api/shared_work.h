// Identical requests in flight share one computation: the first caller of a key computes, and
// every caller that arrives with the same key before it finishes waits for that answer instead of
// computing it again. Once the answer is out the key is forgotten (what lasts is the analysis
// cache's business). Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace podscope::coordinator {

template <typename T>
class SharedWork {
 public:
  struct Outcome {
    T value;
    bool shared = false;  // another caller computed it
  };

  // A `compute` that throws ends every caller of that computation with its exception.
  Outcome Run(const std::string& key, const std::function<T()>& compute) {
    std::shared_ptr<Slot> slot;
    bool mine = false;
    {
      absl::MutexLock lock(&mu_);
      std::shared_ptr<Slot>& found = slots_[key];
      if (found == nullptr) {
        found = std::make_shared<Slot>();
        mine = true;
      }
      slot = found;
    }
    if (!mine) {
      waiting_.fetch_add(1);
      absl::MutexLock lock(&slot->mu);
      slot->mu.Await(absl::Condition(
          +[](Slot* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return s->done; }, slot.get()));
      waiting_.fetch_sub(1);
      if (slot->error != nullptr) std::rethrow_exception(slot->error);
      return {*slot->value, true};
    }
    std::shared_ptr<const T> value;
    std::exception_ptr error;
    try {
      value = std::make_shared<const T>(compute());
    } catch (...) {
      error = std::current_exception();
    }
    {
      // Forgotten first: a caller arriving from now on computes afresh (it may see newer data).
      absl::MutexLock lock(&mu_);
      slots_.erase(key);
    }
    {
      absl::MutexLock lock(&slot->mu);
      slot->value = value;
      slot->error = error;
      slot->done = true;
    }
    if (error != nullptr) std::rethrow_exception(error);
    return {*value, false};
  }

  // Callers waiting for another's answer, over every key.
  size_t waiting() const { return waiting_.load(); }

 private:
  struct Slot {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    std::shared_ptr<const T> value ABSL_GUARDED_BY(mu);  // shared by the waiters, copied once each
    std::exception_ptr error ABSL_GUARDED_BY(mu);
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> waiting_{0};
};

}  // namespace podscope::coordinator
