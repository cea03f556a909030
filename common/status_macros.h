// Small helpers for absl::Status plumbing, used across every module.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PODSCOPE_CONCAT_INNER(a, b) a##b
#define PODSCOPE_CONCAT(a, b) PODSCOPE_CONCAT_INNER(a, b)

// Returns from the current function when `expr` yields a non-OK absl::Status.
#define RETURN_IF_ERROR(expr)                            \
  do {                                                   \
    ::absl::Status podscope_status_ = (expr);            \
    if (!podscope_status_.ok()) return podscope_status_; \
  } while (false)

// `ASSIGN_OR_RETURN(auto x, Foo())`: declares/assigns x from a StatusOr or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  PODSCOPE_ASSIGN_OR_RETURN_IMPL(PODSCOPE_CONCAT(podscope_statusor_, __LINE__), lhs, expr)

#define PODSCOPE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()
