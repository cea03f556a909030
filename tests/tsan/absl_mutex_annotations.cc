// ThreadSanitizer and Debian's absl::Mutex. Debian builds abseil without TSan, so its Mutex
// synchronises nothing that TSan can see, and every access guarded by one would be reported as a
// race. The TSan build (CMake option PODSCOPE_TSAN) links this file into every executable: it
// defines the Mutex and CondVar entry points itself, so calls reach it first, tells TSan what
// each one does with the __tsan_mutex_* annotations (the ones abseil makes when it is built with
// TSan), and calls the library's own function, found with dlsym(RTLD_NEXT). Test-only; never
// part of a product binary.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"

namespace {

#define PODSCOPE_STR2(x) #x
#define PODSCOPE_STR(x) PODSCOPE_STR2(x)

// The library's symbol for `suffix` under absl's inline namespace ("debian3" on Debian 12).
template <typename Fn>
Fn Real(const char* suffix) {
  const char* ns = PODSCOPE_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = std::string("_ZN4absl") + std::to_string(std::strlen(ns)) + ns + suffix;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_mutex_annotations: %s not found in libabsl_synchronization\n",
                 name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

using MutexFn = void (*)(absl::Mutex*);
using MutexBoolFn = bool (*)(absl::Mutex*);
using CondFn = void (*)(absl::Mutex*, const absl::Condition&);
using CondTimeoutFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Duration);
using CondDeadlineFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Time);
using WaitFn = void (*)(absl::CondVar*, absl::Mutex*);
using WaitTimeoutFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Duration);
using WaitDeadlineFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Time);

constexpr unsigned kRead = __tsan_mutex_read_lock;

// The library's entry points call each other (AwaitWithTimeout calls AwaitWithDeadline through
// the PLT, so through us): only the outermost call on a thread is annotated.
thread_local int t_depth = 0;
struct Outermost {
  Outermost() { ++t_depth; }
  ~Outermost() { --t_depth; }
  Outermost(const Outermost&) = delete;
  Outermost& operator=(const Outermost&) = delete;
};

void Acquired(absl::Mutex* mu, unsigned flags) {
  __tsan_mutex_pre_lock(mu, flags);
  __tsan_mutex_post_lock(mu, flags, 0);
}

// Conditions are evaluated inside the library by whichever thread unlocks or waits; the accesses
// they make happen with the lock held, so they are left out of TSan's view between the pre and
// post annotations, as abseil's own instrumentation does.
template <typename Call>
auto Releasing(absl::Mutex* mu, unsigned flags, Call call) {
  __tsan_mutex_pre_unlock(mu, flags);
  auto result = call();
  __tsan_mutex_post_unlock(mu, flags);
  Acquired(mu, flags);
  return result;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const MutexFn real = Real<MutexFn>("5Mutex4LockEv");
  if (t_depth > 0) return real(this);
  const Outermost outermost;
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::Unlock() {
  static const MutexFn real = Real<MutexFn>("5Mutex6UnlockEv");
  if (t_depth > 0) return real(this);
  const Outermost outermost;
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

bool Mutex::TryLock() {
  static const MutexBoolFn real = Real<MutexBoolFn>("5Mutex7TryLockEv");
  if (t_depth > 0) return real(this);
  const Outermost outermost;
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(
      this, locked ? __tsan_mutex_try_lock : __tsan_mutex_try_lock | __tsan_mutex_try_lock_failed,
      0);
  return locked;
}

void Mutex::ReaderLock() {
  static const MutexFn real = Real<MutexFn>("5Mutex10ReaderLockEv");
  if (t_depth > 0) return real(this);
  const Outermost outermost;
  __tsan_mutex_pre_lock(this, kRead);
  real(this);
  __tsan_mutex_post_lock(this, kRead, 0);
}

void Mutex::ReaderUnlock() {
  static const MutexFn real = Real<MutexFn>("5Mutex12ReaderUnlockEv");
  if (t_depth > 0) return real(this);
  const Outermost outermost;
  __tsan_mutex_pre_unlock(this, kRead);
  real(this);
  __tsan_mutex_post_unlock(this, kRead);
}

bool Mutex::ReaderTryLock() {
  static const MutexBoolFn real = Real<MutexBoolFn>("5Mutex13ReaderTryLockEv");
  if (t_depth > 0) return real(this);
  const Outermost outermost;
  __tsan_mutex_pre_lock(this, kRead | __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this,
                         locked ? kRead | __tsan_mutex_try_lock
                                : kRead | __tsan_mutex_try_lock | __tsan_mutex_try_lock_failed,
                         0);
  return locked;
}

void Mutex::LockWhen(const Condition& cond) {
  static const CondFn real = Real<CondFn>("5Mutex8LockWhenERKNS0_9ConditionE");
  if (t_depth > 0) return real(this, cond);
  const Outermost outermost;
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const CondTimeoutFn real =
      Real<CondTimeoutFn>("5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  if (t_depth > 0) return real(this, cond, timeout);
  const Outermost outermost;
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const CondDeadlineFn real =
      Real<CondDeadlineFn>("5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  if (t_depth > 0) return real(this, cond, deadline);
  const Outermost outermost;
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

void Mutex::Await(const Condition& cond) {
  static const CondFn real = Real<CondFn>("5Mutex5AwaitERKNS0_9ConditionE");
  if (t_depth > 0) return real(this, cond);
  const Outermost outermost;
  Releasing(this, 0, [&] {
    real(this, cond);
    return true;
  });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const CondTimeoutFn real =
      Real<CondTimeoutFn>("5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  if (t_depth > 0) return real(this, cond, timeout);
  const Outermost outermost;
  return Releasing(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const CondDeadlineFn real =
      Real<CondDeadlineFn>("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  if (t_depth > 0) return real(this, cond, deadline);
  const Outermost outermost;
  return Releasing(this, 0, [&] { return real(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  static const WaitFn real = Real<WaitFn>("7CondVar4WaitEPNS0_5MutexE");
  if (t_depth > 0) return real(this, mu);
  const Outermost outermost;
  Releasing(mu, 0, [&] {
    real(this, mu);
    return true;
  });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const WaitTimeoutFn real =
      Real<WaitTimeoutFn>("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  if (t_depth > 0) return real(this, mu, timeout);
  const Outermost outermost;
  return Releasing(mu, 0, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const WaitDeadlineFn real =
      Real<WaitDeadlineFn>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  if (t_depth > 0) return real(this, mu, deadline);
  const Outermost outermost;
  return Releasing(mu, 0, [&] { return real(this, mu, deadline); });
}

ABSL_NAMESPACE_END
}  // namespace absl
