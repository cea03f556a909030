#include "common/kineto/decimal_time.h"

#include <limits>

namespace podscope::common {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool ParseMicrosAsNanos(std::string_view token, int64_t* nanos) {
  // Fast path for what profilers write: up to 16 integer digits (epoch microseconds) and up
  // to 3 decimals, followed by the end or a delimiter. At most 19 digits fit an unsigned
  // 64-bit value; everything else takes the general path below.
  {
    const char* p = token.data();
    const char* end = p + token.size();
    uint64_t value = 0;
    const char* digits_start = p;
    while (p < end && IsDigit(*p) && p - digits_start < 16) value = value * 10 + (*p++ - '0');
    if (p > digits_start && (p == digits_start + 1 || *digits_start != '0')) {
      int frac = 0;
      bool ok = true;
      if (p < end && *p == '.') {
        ++p;
        while (p < end && IsDigit(*p) && frac < 3) {
          value = value * 10 + (*p++ - '0');
          ++frac;
        }
        ok = frac > 0 && (p == end || !IsDigit(*p));
      }
      if (ok && (p == end || *p == ' ' || *p == ',' || *p == '}' || *p == ']' || *p == '\n' ||
                 *p == '\r' || *p == '\t')) {
        static constexpr uint64_t kScale[] = {1000, 100, 10, 1};
        // value < 10^19 and value * scale < 10^19 < 2^64: no wrap before the range check.
        const uint64_t scaled = value * kScale[frac];
        if (scaled <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          *nanos = static_cast<int64_t>(scaled);
          return true;
        }
      }
    }
  }
  while (!token.empty() && (token.back() == ' ' || token.back() == '\n' || token.back() == '\r' ||
                            token.back() == '\t')) {
    token.remove_suffix(1);
  }
  size_t i = 0;
  const size_t n = token.size();
  bool negative = false;
  if (i < n && token[i] == '-') {
    negative = true;
    ++i;
  }
  if (i == n || !IsDigit(token[i])) return false;
  // Up to 36 significant digits fit in an unsigned 128-bit mantissa with room to spare.
  unsigned __int128 mantissa = 0;
  int significant = 0;
  int dropped = 0;  // integer digits beyond the mantissa's capacity (scale up by these)
  auto take_digit = [&](char c) {
    if (significant < 36) {
      mantissa = mantissa * 10 + static_cast<unsigned>(c - '0');
      if (mantissa != 0) ++significant;
      return true;
    }
    return false;
  };
  if (token[i] == '0') {
    ++i;
  } else {
    while (i < n && IsDigit(token[i])) {
      if (!take_digit(token[i])) ++dropped;
      ++i;
    }
  }
  int frac_digits = 0;
  if (i < n && token[i] == '.') {
    ++i;
    if (i == n || !IsDigit(token[i])) return false;
    while (i < n && IsDigit(token[i])) {
      if (take_digit(token[i])) ++frac_digits;
      ++i;
    }
  }
  int exponent = 0;
  if (i < n && (token[i] == 'e' || token[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < n && (token[i] == '+' || token[i] == '-')) {
      exp_negative = token[i] == '-';
      ++i;
    }
    if (i == n || !IsDigit(token[i])) return false;
    while (i < n && IsDigit(token[i])) {
      if (exponent < 10000) exponent = exponent * 10 + (token[i] - '0');
      ++i;
    }
    if (exp_negative) exponent = -exponent;
  }
  if (i != n) return false;

  // value_ns = mantissa * 10^(exponent + dropped + 3 - frac_digits)
  int scale = exponent + dropped + 3 - frac_digits;
  constexpr auto kMax = static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max());
  if (mantissa == 0) {
    *nanos = 0;
    return true;
  }
  if (scale >= 0) {
    for (; scale > 0; --scale) {
      mantissa *= 10;
      if (mantissa > kMax + 1) return false;
    }
  } else {
    if (scale < -38) {
      mantissa = 0;
    } else {
      unsigned __int128 divisor = 1;
      for (int k = 0; k < -scale; ++k) divisor *= 10;
      const unsigned __int128 quotient = mantissa / divisor;
      const unsigned __int128 remainder = mantissa % divisor;
      mantissa = quotient + (remainder * 2 >= divisor ? 1 : 0);
    }
  }
  if (mantissa > kMax + (negative ? 1 : 0)) return false;
  *nanos = negative ? static_cast<int64_t>(0 - static_cast<uint64_t>(mantissa))
                    : static_cast<int64_t>(mantissa);
  return true;
}

}  // namespace podscope::common
