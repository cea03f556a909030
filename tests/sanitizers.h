// Whether this test is compiled under AddressSanitizer: gcc says so with __SANITIZE_ADDRESS__,
// clang through __has_feature. Tests whose figures the sanitizer changes (its quarantine of freed
// blocks is in a process's peak memory) branch on PODSCOPE_UNDER_ASAN.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define PODSCOPE_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PODSCOPE_UNDER_ASAN 1
#endif
#endif
