// Whether this test is compiled under a sanitizer: gcc says so with __SANITIZE_ADDRESS__ and
// __SANITIZE_THREAD__, clang through __has_feature. Tests whose figures the sanitizer changes
// (its quarantine of freed blocks is in a process's peak memory) branch on PODSCOPE_UNDER_ASAN.
//
// Tests whose worth is breadth (twenty seeds, two minutes of a clean job) take a few of their
// cases under a sanitizer (SanitizedOr): the sanitizer checks memory and threads on the same code
// with those, and the plain suite checks the figures across all of them.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define PODSCOPE_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PODSCOPE_UNDER_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define PODSCOPE_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PODSCOPE_UNDER_TSAN 1
#endif
#endif

namespace podscope::testing {

#if defined(PODSCOPE_UNDER_ASAN) || defined(PODSCOPE_UNDER_TSAN)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// `plain` in the plain build, `sanitized` under a sanitizer.
template <typename T>
constexpr T SanitizedOr(T sanitized, T plain) {
  return kSanitized ? sanitized : plain;
}

}  // namespace podscope::testing
