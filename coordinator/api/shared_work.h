// Identical requests in flight share one computation: the first caller of a key computes, and
// every caller that arrives with the same key before it finishes waits for that answer instead of
// computing it again. Once the answer is out the key is forgotten (what lasts is the analysis
// cache's business). A computation every caller has left can be stopped. Thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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

  // Whether a caller has gone (its client closed the connection): null for one that never goes.
  using Gone = std::function<bool()>;

  // A `compute` that throws ends every caller of that computation with its exception. `compute`
  // is given `abandoned`, true once every caller of the computation has gone (this one by `gone`,
  // those waiting for it by theirs), so that work nobody waits for can stop.
  Outcome Run(const std::string& key,
              const std::function<T(const std::function<bool()>& abandoned)>& compute,
              const Gone& gone = {}) {
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
      // Registered while this caller waits, so `gone` outlives every call the computer makes.
      if (gone) {
        slot->waiters_gone.push_back(&gone);
      } else {
        ++slot->waiters_staying;
      }
      slot->mu.Await(absl::Condition(
          +[](Slot* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return s->done; }, slot.get()));
      if (gone) {
        slot->waiters_gone.erase(
            std::find(slot->waiters_gone.begin(), slot->waiters_gone.end(), &gone));
      } else {
        --slot->waiters_staying;
      }
      waiting_.fetch_sub(1);
      if (slot->error != nullptr) std::rethrow_exception(slot->error);
      return {*slot->value, true};
    }
    const std::function<bool()> abandoned = [&gone, &slot] {
      if (!gone || !gone()) return false;
      absl::MutexLock lock(&slot->mu);
      if (slot->waiters_staying > 0) return false;
      for (const Gone* waiter : slot->waiters_gone) {
        if (!(*waiter)()) return false;
      }
      return true;
    };
    std::shared_ptr<const T> value;
    std::exception_ptr error;
    try {
      value = std::make_shared<const T>(compute(abandoned));
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

  // For work whose callers never go.
  Outcome Run(const std::string& key, const std::function<T()>& compute) {
    return Run(key, [&compute](const std::function<bool()>&) { return compute(); });
  }

  // Callers waiting for another's answer, over every key.
  size_t waiting() const { return waiting_.load(); }

 private:
  struct Slot {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    std::shared_ptr<const T> value ABSL_GUARDED_BY(mu);  // shared by the waiters, copied once each
    std::exception_ptr error ABSL_GUARDED_BY(mu);
    std::vector<const Gone*> waiters_gone ABSL_GUARDED_BY(mu);
    int waiters_staying ABSL_GUARDED_BY(mu) = 0;  // waiters with no way to tell they went
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> waiting_{0};
};

}  // namespace podscope::coordinator
